//! Cross-contamination: a prompt that names another live session's project or path and not
//! its own belongs to the other session. Names match as whole words, case-insensitively;
//! paths match as path prefixes (`~` and the home directory are treated alike). A project
//! name that is a common word ("api", "web", "app") is too weak to decide on its own, so
//! for those only the path counts. When another session shares this one's name or path,
//! naming it says nothing.

use super::lexicon::GENERIC_PROJECTS;
use super::OtherSession;

/// Project names too generic to identify a session.
fn generic(name: &str) -> bool {
    GENERIC_PROJECTS.contains(name)
}

/// True if `needle` occurs in `hay` (both lower case) bounded by non-word characters.
fn has_word(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(off) = hay[from..].find(needle) {
        let s = from + off;
        let e = s + needle.len();
        let before_ok = hay[..s].chars().next_back().is_none_or(|c| !word(c));
        let after_ok = hay[e..].chars().next().is_none_or(|c| !word(c));
        if before_ok && after_ok {
            return true;
        }
        from = s + needle.chars().next().map(char::len_utf8).unwrap_or(1);
    }
    false
}

/// A path as it may appear in a prompt: trailing slash dropped, lower case.
fn path_forms(path: &str) -> Vec<String> {
    let p = path.trim().trim_end_matches('/').to_lowercase();
    if p.len() < 2 {
        return Vec::new();
    }
    let mut forms = vec![p.clone()];
    // /Users/ana/code/x and /home/ana/code/x are also written ~/code/x.
    for home in ["/users/", "/home/"] {
        if let Some(rest) = p.strip_prefix(home) {
            if let Some((_, after_user)) = rest.split_once('/') {
                forms.push(format!("~/{after_user}"));
            }
        }
    }
    forms
}

fn names_path(hay: &str, path: &str) -> bool {
    path_forms(path).iter().any(|f| {
        let mut from = 0;
        while let Some(off) = hay[from..].find(f.as_str()) {
            let e = from + off + f.len();
            // A prefix of a longer directory name ("/code/api2") is not this path.
            if hay[e..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'))
            {
                return true;
            }
            from = e;
        }
        false
    })
}

/// The other session a prompt belongs to, if it names one and not its own.
pub(crate) fn check(
    text: &str,
    project: &str,
    path: &str,
    others: &[OtherSession],
) -> Option<String> {
    if others.is_empty() {
        return None;
    }
    let hay = text.to_lowercase();
    let own = project.trim().to_lowercase();
    let own_path = path.trim().trim_end_matches('/').to_lowercase();
    let names_own = (!own.is_empty() && has_word(&hay, &own))
        || (!own_path.is_empty() && names_path(&hay, &own_path));
    if names_own {
        return None;
    }
    for o in others {
        let name = o.project.trim().to_lowercase();
        let opath = o.path.trim().trim_end_matches('/').to_lowercase();
        let same_name = !name.is_empty() && name == own;
        let same_path = !opath.is_empty()
            && !own_path.is_empty()
            && (own_path == opath || own_path.starts_with(&format!("{opath}/")));
        if !same_name && name.chars().count() >= 3 && !generic(&name) && has_word(&hay, &name) {
            return Some(format!(
                "names another session's project \"{}\"",
                o.project.trim()
            ));
        }
        if !same_path && !opath.is_empty() && names_path(&hay, &opath) {
            return Some(format!("names another session's path {}", o.path.trim()));
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn others() -> Vec<OtherSession> {
        vec![
            OtherSession {
                project: "meshd".into(),
                path: "/Users/ana/code/meshd".into(),
            },
            OtherSession {
                project: "api".into(),
                path: "/Users/ana/code/api".into(),
            },
        ]
    }

    #[test]
    fn other_projects_and_paths_are_caught() {
        let o = others();
        let k = "/Users/ana/code/karl";
        assert!(check("Add a /health endpoint to meshd.", "karl", k, &o).is_some());
        assert!(check("Open ~/code/meshd/src/main.rs", "karl", k, &o).is_some());
        assert!(check("Run the tests in /Users/ana/code/api", "karl", k, &o).is_some());
    }

    #[test]
    fn own_mentions_and_common_words_pass() {
        let o = others();
        let k = "/Users/ana/code/karl";
        assert!(check("Port the meshd health check idea to karl.", "karl", k, &o).is_none());
        assert!(check("Add an API endpoint for sessions.", "karl", k, &o).is_none());
        assert!(check("Rename meshdump to dumper.", "karl", k, &o).is_none());
        assert!(check("Add a test.", "karl", k, &[]).is_none());
    }
}
