//! The byte-pair tokenizer of a SentencePiece-style `tokenizer.json` (the Llama 2 family:
//! spaces become `▁`, one `▁` is prepended, merges by rank, unknown characters fall back to
//! `<0xNN>` byte tokens). Pure: built from the file's text, then text in, token ids out.
//!
//! No token of such a vocabulary holds a `▁` after a non-`▁` character, so text is cut
//! before every `▁` that follows another character and each piece is merged on its own —
//! the same ids as merging the whole string, at a fraction of the cost.

use std::collections::HashMap;

use serde::Deserialize;

use super::EmbedError;

/// The word-boundary mark of SentencePiece vocabularies.
const MARK: char = '\u{2581}';

/// The tokenizer: vocabulary, merge ranks and the byte tokens.
#[derive(Debug)]
pub struct Bpe {
    vocab: HashMap<String, u32>,
    /// (left, right) → (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// `<0x00>` … `<0xFF>`, where the vocabulary has them.
    bytes: Vec<Option<u32>>,
    unk: Option<u32>,
}

#[derive(Deserialize)]
struct File {
    model: Model,
}

#[derive(Deserialize)]
struct Model {
    #[serde(rename = "type")]
    kind: String,
    vocab: HashMap<String, u32>,
    merges: Vec<Merge>,
    #[serde(default)]
    unk_token: Option<String>,
}

/// Merges are written `"a b"` by older files and `["a", "b"]` by newer ones.
#[derive(Deserialize)]
#[serde(untagged)]
enum Merge {
    Joined(String),
    Pair(String, String),
}

impl Bpe {
    /// Reads a `tokenizer.json` text whose model is BPE.
    pub fn from_json(text: &str) -> Result<Bpe, EmbedError> {
        let file: File = serde_json::from_str(text)
            .map_err(|e| EmbedError::Tokenizer(format!("not a tokenizer.json: {e}")))?;
        let m = file.model;
        if m.kind != "BPE" {
            return Err(EmbedError::Tokenizer(format!(
                "the tokenizer is {}, not BPE",
                m.kind
            )));
        }
        let mut merges = HashMap::with_capacity(m.merges.len());
        for (rank, merge) in m.merges.into_iter().enumerate() {
            let (a, b) = match merge {
                Merge::Pair(a, b) => (a, b),
                Merge::Joined(s) => match s.split_once(' ') {
                    Some((a, b)) => (a.to_string(), b.to_string()),
                    None => {
                        return Err(EmbedError::Tokenizer(format!(
                            "merge {rank} ({s:?}) is not two tokens"
                        )))
                    }
                },
            };
            let joined = format!("{a}{b}");
            if let (Some(&ia), Some(&ib), Some(&ij)) =
                (m.vocab.get(&a), m.vocab.get(&b), m.vocab.get(&joined))
            {
                merges.entry((ia, ib)).or_insert((rank as u32, ij));
            }
        }
        let bytes = (0..=255u8)
            .map(|b| m.vocab.get(&format!("<0x{b:02X}>")).copied())
            .collect();
        let unk = m.unk_token.as_ref().and_then(|u| m.vocab.get(u).copied());
        Ok(Bpe {
            vocab: m.vocab,
            merges,
            bytes,
            unk,
        })
    }

    /// The id of one token, spelled as the vocabulary spells it.
    pub fn id_of(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }

    /// The largest token id, for checking it against the embedding table.
    pub fn max_id(&self) -> u32 {
        self.vocab.values().copied().max().unwrap_or(0)
    }

    /// Token ids of `text`, as the tokenizer encodes it without special tokens.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut out = Vec::new();
        if text.is_empty() {
            return out;
        }
        let mut normalized = String::with_capacity(text.len() + 3);
        normalized.push(MARK);
        for c in text.chars() {
            normalized.push(if c == ' ' { MARK } else { c });
        }
        let mut start = 0;
        let mut prev_mark = true;
        for (i, c) in normalized.char_indices() {
            if c == MARK && !prev_mark {
                self.encode_piece(&normalized[start..i], &mut out);
                start = i;
            }
            prev_mark = c == MARK;
        }
        self.encode_piece(&normalized[start..], &mut out);
        out
    }

    fn encode_piece(&self, piece: &str, out: &mut Vec<u32>) {
        // Symbols start as characters; a character outside the vocabulary becomes its bytes
        // (which never merge) or the unknown token.
        let mut syms: Vec<u32> = Vec::with_capacity(piece.len());
        let mut buf = [0u8; 4];
        for c in piece.chars() {
            let s = c.encode_utf8(&mut buf);
            match self.vocab.get(&*s) {
                Some(&id) => syms.push(id),
                None => {
                    let fallback: Option<Vec<u32>> =
                        s.bytes().map(|b| self.bytes[b as usize]).collect();
                    match (fallback, self.unk) {
                        (Some(ids), _) => syms.extend(ids),
                        (None, Some(unk)) => {
                            if syms.last() != Some(&unk) {
                                syms.push(unk);
                            }
                        }
                        (None, None) => {}
                    }
                }
            }
        }
        loop {
            let best = syms
                .windows(2)
                .enumerate()
                .filter_map(|(i, w)| self.merges.get(&(w[0], w[1])).map(|&(r, id)| (r, i, id)))
                .min();
            let Some((_, i, id)) = best else { break };
            syms[i] = id;
            syms.remove(i + 1);
        }
        out.extend(syms);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tiny() -> Bpe {
        // ▁ a b ab ▁ab <0xC3> <0xA9>, merges: a+b, ▁+ab.
        let json = r#"{"model":{"type":"BPE","unk_token":"<unk>","vocab":{
            "<unk>":0,"▁":1,"a":2,"b":3,"ab":4,"▁ab":5,"<0xC3>":6,"<0xA9>":7},
            "merges":["a b",["▁","ab"]]}}"#;
        Bpe::from_json(json).unwrap()
    }

    #[test]
    fn merges_by_rank_within_pieces() {
        let t = tiny();
        assert_eq!(t.encode("ab"), vec![5]);
        assert_eq!(t.encode("ab ab"), vec![5, 5]);
        assert_eq!(t.encode("ba"), vec![1, 3, 2]);
        assert_eq!(t.encode(""), Vec::<u32>::new());
    }

    #[test]
    fn unknown_characters_fall_back_to_bytes() {
        let t = tiny();
        assert_eq!(t.encode("é"), vec![1, 6, 7]);
    }

    #[test]
    fn bad_files_are_refused_with_a_reason() {
        assert!(Bpe::from_json("{}").is_err());
        let wp = r#"{"model":{"type":"WordPiece","vocab":{},"merges":[]}}"#;
        let e = Bpe::from_json(wp).unwrap_err().to_string();
        assert!(e.contains("WordPiece"), "{e}");
    }
}
