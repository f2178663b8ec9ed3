//! Pane targets as operators write them: `session:window.pane` (e.g. `agent-codex:1.1`)
//! or a tmux pane id (`%12`). Anything else is refused before it reaches tmux, so a
//! target can never smuggle tmux syntax (`-t` flags, `{last}`, `=`, `!`) into a command.

use std::fmt;

use crate::error::{Error, Result};

/// A validated pane target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PaneTarget {
    /// A tmux pane id such as `%12`: stable for the pane's life.
    Id(u32),
    /// `session:window.pane`, resolved by tmux at the time of use.
    Position {
        session: String,
        window: u32,
        pane: u32,
    },
}

impl PaneTarget {
    /// Parses and validates a target.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |why| Error::InvalidTarget {
            target: s.to_string(),
            why,
        };
        let s_trim = s.trim();
        if s_trim.is_empty() {
            return Err(bad("empty"));
        }
        if let Some(id) = s_trim.strip_prefix('%') {
            return id
                .parse::<u32>()
                .map(PaneTarget::Id)
                .map_err(|_| bad("a pane id is % followed by digits"));
        }
        let (session, rest) = s_trim
            .rsplit_once(':')
            .ok_or_else(|| bad("missing ':' between session and window"))?;
        if session.is_empty() {
            return Err(bad("empty session name"));
        }
        if !session
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | '@' | '+'))
        {
            return Err(bad(
                "session names may hold letters, digits and - _ . @ + only",
            ));
        }
        let (window, pane) = rest
            .split_once('.')
            .ok_or_else(|| bad("missing '.' between window and pane"))?;
        let window = window
            .parse::<u32>()
            .map_err(|_| bad("window must be a number"))?;
        let pane = pane
            .parse::<u32>()
            .map_err(|_| bad("pane must be a number"))?;
        Ok(PaneTarget::Position {
            session: session.to_string(),
            window,
            pane,
        })
    }

    /// The string handed to tmux's `-t`.
    pub fn tmux_target(&self) -> String {
        self.to_string()
    }

    /// The session part, when the target names one.
    pub fn session(&self) -> Option<&str> {
        match self {
            PaneTarget::Id(_) => None,
            PaneTarget::Position { session, .. } => Some(session),
        }
    }
}

impl fmt::Display for PaneTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PaneTarget::Id(id) => write!(f, "%{id}"),
            PaneTarget::Position {
                session,
                window,
                pane,
            } => write!(f, "{session}:{window}.{pane}"),
        }
    }
}

impl std::str::FromStr for PaneTarget {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// Validates a machine name (fleet names such as `mac2`): letters, digits, `-`, `_`, `.`.
pub fn valid_machine_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_both_forms() {
        assert_eq!(PaneTarget::parse("%12").unwrap(), PaneTarget::Id(12));
        assert_eq!(
            PaneTarget::parse("agent-codex:1.1").unwrap(),
            PaneTarget::Position {
                session: "agent-codex".into(),
                window: 1,
                pane: 1
            }
        );
        assert_eq!(
            PaneTarget::parse("agent-codex:1.1").unwrap().to_string(),
            "agent-codex:1.1"
        );
    }

    #[test]
    fn refuses_everything_else_with_a_reason() {
        for bad in [
            "",
            "%",
            "%x",
            "agent",
            "agent:1",
            "agent:x.1",
            ":1.1",
            "a b:1.1",
            "-t:1.1x",
            "{last}",
            "=s:1.1",
            "s:1.-1",
        ] {
            let err = PaneTarget::parse(bad).unwrap_err().to_string();
            assert!(err.contains("session:window.pane"), "{bad}: {err}");
        }
    }

    #[test]
    fn machine_names() {
        assert!(valid_machine_name("mac2"));
        assert!(!valid_machine_name("mac 2"));
        assert!(!valid_machine_name(""));
    }
}
