"""Fits KARL's learned repeat judge (common/src/gate/rewording.rs) to the tuning prompts.

    python3 scripts/train_rewording.py FEATURES.tsv > common/src/gate/rules/rewording.json

FEATURES.tsv comes from `common/tests/rewording_training.rs` (scripts/train-rewording.sh
runs both): one line per (candidate, earlier prompt) pair of the tuning repeat files —
id, session, `fit` or `check`, category, label, then the signals in the order of
`rewording::SIGNALS`. The trees are fitted to the `fit` lines; the `check` lines are only
scored, and their figures reported.

Gradient-boosted trees (scikit-learn), fitted five times to every pair on different row
samples and averaged (see `Bag`); the threshold is chosen by
5-fold cross-validation grouped by session, as the highest recall of reworded repeats
whose fresh prompts wrongly blocked stay at or under --fresh (a candidate is blocked when
any of its pairs reaches the threshold). The cross-validated figures go to standard error
and into the model's `fitted_on`.
"""

import argparse
import collections
import json
import sys

import numpy as np
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.model_selection import GroupKFold

SIGNALS = [
    "score", "cosine", "trigram_jaccard", "trigram_cover", "term_cover_candidate",
    "term_cover_earlier", "ln_words_candidate", "ln_words_earlier", "score_if_nothing_new",
    "why_overlap", "why_different_action", "why_new_object", "why_sibling_identifier",
    "why_another_method", "why_another_file", "why_another_member", "why_another_name",
    "why_another_value", "why_noun_modifier", "why_different_behaviour",
    "why_different_object", "why_other", "new_nothing", "new_substitution", "new_addition",
    "new_narrowing", "new_undoing", "new_words_candidate", "new_words_earlier",
    "vector_cover_candidate", "vector_cover_earlier", "new_names_candidate", "new_names_earlier",
]


BAG = 5


class Bag:
    """Gradient-boosted trees fitted BAG times on different row samples, their log-odds
    averaged: one fit's scores for a pair swing by tenths when a few training pairs change,
    and the average holds steadier on prompts it never saw."""

    def __init__(self, models):
        self.models = models
        self.learning_rate = models[0].learning_rate / len(models)

    def decision_function(self, x):
        return np.mean([m.decision_function(x) for m in self.models], axis=0)

    def predict_proba(self, x):
        p = 1.0 / (1.0 + np.exp(-self.decision_function(x)))
        return np.stack([1.0 - p, p], axis=1)


def fit(x, y):
    return Bag([
        GradientBoostingClassifier(
            n_estimators=300, max_depth=3, learning_rate=0.05, subsample=0.8,
            min_samples_leaf=10, random_state=seed,
        ).fit(x, y)
        for seed in range(BAG)
    ])


def figures(ids, cats, p, t):
    best = collections.defaultdict(float)
    for i, q in zip(ids, p):
        best[i] = max(best[i], q)
    near = [best[i] >= t for i in best if cats[i] == "near_repeat"]
    fresh = [best[i] >= t for i in best if cats[i] == "fresh"]
    return float(np.mean(near)), float(np.mean(fresh)), len(near), len(fresh)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("features")
    ap.add_argument("--fresh", type=float, default=0.045)
    a = ap.parse_args()
    ids, groups, y, x, cats = [], [], [], [], {}
    check_ids, check_x = [], []
    for line in open(a.features, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        cats[f[0]] = f[3]
        if f[2] == "check":
            check_ids.append(f[0])
            check_x.append([float(v) for v in f[5:]])
            continue
        ids.append(f[0])
        groups.append(f[1])
        y.append(int(f[4]))
        x.append([float(v) for v in f[5:]])
    x = np.array(x, dtype=np.float32)
    y = np.array(y)
    if x.shape[1] != len(SIGNALS):
        sys.exit(f"{a.features}: {x.shape[1]} signals, expected {len(SIGNALS)}")
    p = np.zeros(len(y))
    for train, test in GroupKFold(n_splits=5).split(x, y, groups):
        p[test] = fit(x[train], y[train]).predict_proba(x[test])[:, 1]
    grid = [t / 100 for t in range(30, 96)]
    ok = [t for t in grid if figures(ids, cats, p, t)[1] <= a.fresh]
    t = min(ok) if ok else grid[-1]
    near, fresh, n_near, n_fresh = figures(ids, cats, p, t)
    note = (
        f"{len(y)} pairs of the tuning repeat files; 5-fold cross-validation by session at "
        f"threshold {t:.2f}: reworded repeats blocked {100 * near:.1f}% of {n_near}, fresh "
        f"prompts wrongly blocked {100 * fresh:.1f}% of {n_fresh}"
    )
    m = fit(x, y)
    if check_ids:
        cx = np.array(check_x, dtype=np.float32)
        near, fresh, n_near, n_fresh = figures(check_ids, cats, m.predict_proba(cx)[:, 1], t)
        note += (
            f"; on the files checked, not fitted: reworded repeats blocked {100 * near:.1f}% "
            f"of {n_near}, fresh prompts wrongly blocked {100 * fresh:.1f}% of {n_fresh}"
        )
    print(note, file=sys.stderr)
    base = float(np.mean([g._raw_predict_init(x[:1])[0, 0] for g in m.models]))
    trees = []
    for est in (e for g in m.models for e in g.estimators_[:, 0]):
        tr = est.tree_
        leaf = tr.children_left < 0
        trees.append({
            "feature": [-1 if l else int(f) for f, l in zip(tr.feature, leaf)],
            "threshold": [0.0 if l else float(np.float32(v)) for v, l in zip(tr.threshold, leaf)],
            "left": [int(v) for v in tr.children_left],
            "right": [int(v) for v in tr.children_right],
            "value": [float(np.float32(v)) for v in tr.value[:, 0, 0]],
        })
    # The file must reproduce scikit-learn's scores with f32 comparisons, as Rust reads it.
    raw = np.full(len(y), base)
    for tree in trees:
        for r in range(len(y)):
            i = 0
            while tree["left"][i] >= 0:
                go_left = x[r, tree["feature"][i]] <= np.float32(tree["threshold"][i])
                i = tree["left"][i] if go_left else tree["right"][i]
            raw[r] += m.learning_rate * tree["value"][i]
    gap = float(np.max(np.abs(raw - m.decision_function(x))))
    if gap > 1e-3:
        sys.exit(f"exported trees disagree with scikit-learn by {gap}")
    json.dump({
        "signals": SIGNALS,
        "base": base,
        "rate": m.learning_rate,
        "threshold": t,
        "fitted_on": note,
        "trees": trees,
    }, sys.stdout, separators=(",", ":"))
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
