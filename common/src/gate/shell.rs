//! A small, lenient shell lexer for the destructive rule. It turns any text — a bare command,
//! prose with a command in it, markdown code spans and fences — into commands: their words
//! (quotes removed, escapes resolved, each with its byte range), how each is joined to the
//! previous one (`;`, `&&`, `||`, `|`), redirections, and which commands ran inside `$(…)`,
//! backticks, `<(…)` or parentheses of which other command. It never fails: unbalanced
//! quotes and unclosed substitutions end at the end of the text. One pass, no recursion
//! (nesting lives on an explicit stack), so deep `$( $( … ) )` costs memory, not stack.
//! The contents of quoted strings are reported as ranges so that the caller can lex them
//! again as scripts (`bash -c '…'`, `psql -c "…"`), to a depth of its choosing.

/// One word of a command, quotes removed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Word {
    pub text: String,
    /// Byte range in the lexed text (from the first to the last character that built it).
    pub start: usize,
    pub end: usize,
}

/// How a command is joined to the one before it in the same sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    First,
    /// `;`, `&` or a newline.
    Seq,
    And,
    Or,
    /// `|`: this command reads the previous one's output.
    Pipe,
}

/// One simple command.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub words: Vec<Word>,
    pub link: Link,
    /// Redirections: operator (`>`, `>>`, `<`, …) and target.
    pub redirects: Vec<(String, Word)>,
    /// Commands that ran inside a substitution among this command's words.
    pub subs: Vec<usize>,
    /// The command whose words held the substitution this command ran in.
    pub parent: Option<usize>,
    /// Commands of one sequence (one frame) share a group id.
    pub group: usize,
    /// Inside a code span, fence, substitution or parentheses.
    pub nested: bool,
}

/// The result of lexing one text.
#[derive(Debug, Default)]
pub(crate) struct Lexed {
    pub commands: Vec<Command>,
    /// Byte ranges of the contents of quoted strings (closed or not).
    pub quoted: Vec<(usize, usize)>,
    /// Byte ranges of the contents of backtick spans and fences (closed or not).
    pub code: Vec<(usize, usize)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Top,
    /// `$(…)`
    Dollar,
    /// `` `…` `` (a markdown code span or a shell substitution: lexed the same way).
    Backtick,
    /// A run of two or more backticks: a markdown fence or double-backtick span.
    Fence(usize),
    /// `<(…)` or `>(…)`
    ProcSub,
    /// `(…)`: a subshell, or a call's arguments in an interpreter one-liner.
    Paren,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
    AnsiC,
}

#[derive(Debug)]
struct Frame {
    kind: Kind,
    /// Where the frame's contents begin in the text.
    begin: usize,
    cmd: usize,
    group: usize,
    word: String,
    word_start: Option<usize>,
    word_end: usize,
    quote: Quote,
    quote_start: usize,
    redirect: Option<String>,
}

struct Lexer<'a> {
    text: &'a str,
    out: Lexed,
    stack: Vec<Frame>,
    groups: usize,
}

/// Lexes `text`. Never fails.
pub(crate) fn lex(text: &str) -> Lexed {
    let mut lx = Lexer {
        text,
        out: Lexed::default(),
        stack: Vec::new(),
        groups: 0,
    };
    lx.open(Kind::Top, None, 0);
    lx.run();
    lx.out
}

impl<'a> Lexer<'a> {
    fn new_cmd(&mut self, link: Link, parent: Option<usize>, group: usize, nested: bool) -> usize {
        let idx = self.out.commands.len();
        self.out.commands.push(Command {
            words: Vec::new(),
            link,
            redirects: Vec::new(),
            subs: Vec::new(),
            parent,
            group,
            nested,
        });
        if let Some(p) = parent {
            if let Some(pc) = self.out.commands.get_mut(p) {
                pc.subs.push(idx);
            }
        }
        idx
    }

    fn open(&mut self, kind: Kind, at: Option<usize>, begin: usize) {
        let parent = self.stack.last().map(|f| f.cmd);
        if let (Some(f), Some(at)) = (self.stack.last_mut(), at) {
            // The parent's word now holds a substitution: its value is not known here.
            f.word.push('$');
            f.word_start.get_or_insert(at);
            f.word_end = at + 1;
        }
        let group = self.groups;
        self.groups += 1;
        let nested = kind != Kind::Top;
        let cmd = self.new_cmd(Link::First, parent, group, nested);
        self.stack.push(Frame {
            kind,
            begin,
            cmd,
            group,
            word: String::new(),
            word_start: None,
            word_end: 0,
            quote: Quote::None,
            quote_start: 0,
            redirect: None,
        });
    }

    /// Closes the innermost frame; its contents end at byte `at`.
    fn close(&mut self, at: usize) {
        self.finish_word();
        if let Some(f) = self.stack.pop() {
            if f.quote != Quote::None {
                self.out.quoted.push((f.quote_start, self.text.len()));
            }
            if matches!(f.kind, Kind::Backtick | Kind::Fence(_)) && f.begin <= at {
                self.out.code.push((f.begin, at));
            }
        }
    }

    fn finish_word(&mut self) {
        let Some(f) = self.stack.last_mut() else {
            return;
        };
        let Some(start) = f.word_start.take() else {
            return;
        };
        let word = Word {
            text: std::mem::take(&mut f.word),
            start,
            end: f.word_end,
        };
        let cmd = f.cmd;
        let redirect = f.redirect.take();
        if let Some(c) = self.out.commands.get_mut(cmd) {
            match redirect {
                Some(op) => c.redirects.push((op, word)),
                None => c.words.push(word),
            }
        }
    }

    fn end_command(&mut self, link: Link) {
        self.finish_word();
        let Some(f) = self.stack.last() else {
            return;
        };
        let (cmd, group) = (f.cmd, f.group);
        let Some(c) = self.out.commands.get(cmd) else {
            return;
        };
        if c.words.is_empty() && c.redirects.is_empty() {
            // Nothing yet: keep the command, take the stronger link (`a |\n b`).
            if let Some(c) = self.out.commands.get_mut(cmd) {
                if c.link != Link::Pipe || link == Link::Pipe {
                    c.link = if c.link == Link::First && link == Link::Seq {
                        Link::First
                    } else {
                        link
                    };
                }
            }
            return;
        }
        let (parent, nested) = (c.parent, c.nested);
        let new = self.new_cmd(link, parent, group, nested);
        if let Some(f) = self.stack.last_mut() {
            f.cmd = new;
        }
    }

    fn push_char(&mut self, c: char, at: usize) {
        if let Some(f) = self.stack.last_mut() {
            f.word.push(c);
            f.word_start.get_or_insert(at);
            f.word_end = at + c.len_utf8();
        }
    }

    fn top_kind(&self) -> Kind {
        self.stack.last().map(|f| f.kind).unwrap_or(Kind::Top)
    }

    fn quote(&self) -> Quote {
        self.stack.last().map(|f| f.quote).unwrap_or(Quote::None)
    }

    fn set_quote(&mut self, q: Quote, content_start: usize) {
        if let Some(f) = self.stack.last_mut() {
            f.quote = q;
            f.quote_start = content_start;
            f.word_start.get_or_insert(content_start.saturating_sub(1));
            f.word_end = content_start;
        }
    }

    fn end_quote(&mut self, at: usize) {
        if let Some(f) = self.stack.last_mut() {
            self.out.quoted.push((f.quote_start, at));
            f.quote = Quote::None;
            f.word_end = at + 1;
        }
    }

    fn run(&mut self) {
        let text = self.text;
        let mut i = 0usize;
        while i < text.len() {
            let Some(c) = text[i..].chars().next() else {
                break;
            };
            let next = text
                .as_bytes()
                .get(i + c.len_utf8())
                .copied()
                .map(char::from);
            i += match self.quote() {
                Quote::Single => self.in_single(c, i),
                Quote::AnsiC => self.in_ansi_c(c, i),
                Quote::Double => self.in_double(c, next, i),
                Quote::None => self.unquoted(c, next, i),
            };
        }
        while !self.stack.is_empty() {
            self.close(text.len());
        }
    }

    /// Lexes character `c` at `i` inside single quotes; returns the bytes it took.
    fn in_single(&mut self, c: char, i: usize) -> usize {
        if c == '\'' {
            self.end_quote(i);
        } else {
            self.push_char(c, i);
        }
        c.len_utf8()
    }

    /// Lexes character `c` at `i` inside `$'…'`; returns the bytes it took.
    fn in_ansi_c(&mut self, c: char, i: usize) -> usize {
        if c == '\\' {
            if let Some(n) = self.text[i + 1..].chars().next() {
                self.push_char(n, i + 1);
                return 1 + n.len_utf8();
            }
        } else if c == '\'' {
            self.end_quote(i);
        } else {
            self.push_char(c, i);
        }
        c.len_utf8()
    }

    /// Lexes character `c` at `i` inside double quotes; returns the bytes it took.
    fn in_double(&mut self, c: char, next: Option<char>, i: usize) -> usize {
        if c == '"' {
            self.end_quote(i);
            1
        } else if c == '\\' && matches!(next, Some('"' | '\\' | '$' | '`' | '\n')) {
            if next != Some('\n') {
                self.push_char(next.unwrap_or('\\'), i + 1);
            }
            2
        } else if c == '$' && next == Some('(') {
            self.open(Kind::Dollar, Some(i), i + 2);
            2
        } else if c == '`' {
            self.open(Kind::Backtick, Some(i), i + 1);
            1
        } else {
            self.push_char(c, i);
            c.len_utf8()
        }
    }

    /// Lexes character `c` at `i` outside quotes; returns the bytes it took.
    fn unquoted(&mut self, c: char, next: Option<char>, i: usize) -> usize {
        let text = self.text;
        let prev_alnum = text[..i]
            .chars()
            .next_back()
            .is_some_and(|p| p.is_alphanumeric());
        match c {
            '\n' => {
                self.end_command(Link::Seq);
                1
            }
            c if c.is_whitespace() => {
                self.finish_word();
                c.len_utf8()
            }
            '\\' => match text[i + 1..].chars().next() {
                Some('\n') => 2,
                Some(n) => {
                    self.push_char(n, i + 1);
                    1 + n.len_utf8()
                }
                None => 1,
            },
            // A quote glued to a letter is an apostrophe ("don't") or obfuscation
            // (`r'm'`); the judge strips quote characters from words either way.
            '\'' if !prev_alnum => {
                self.set_quote(Quote::Single, i + 1);
                1
            }
            '"' if !prev_alnum => {
                self.set_quote(Quote::Double, i + 1);
                1
            }
            '$' if next == Some('\'') => {
                self.set_quote(Quote::AnsiC, i + 2);
                2
            }
            '$' if next == Some('(') => {
                self.open(Kind::Dollar, Some(i), i + 2);
                2
            }
            '`' => self.backticks(i),
            _ => self.operator(c, next, i).unwrap_or_else(|| {
                self.push_char(c, i);
                c.len_utf8()
            }),
        }
    }

    /// Lexes a run of backticks at `i`: a code fence, or a command substitution's start or
    /// end; returns the run's length.
    fn backticks(&mut self, i: usize) -> usize {
        let run = self.text.as_bytes()[i..]
            .iter()
            .take_while(|&&b| b == b'`')
            .count();
        if run >= 2 {
            if self.top_kind() == Kind::Fence(run) {
                self.close(i);
            } else {
                self.finish_word();
                self.open(Kind::Fence(run), None, i + run);
            }
        } else if self.top_kind() == Kind::Backtick {
            self.close(i);
        } else {
            self.open(Kind::Backtick, Some(i), i + 1);
        }
        run
    }

    /// Lexes a control or redirection operator at `i`, if `c` starts one; returns its length.
    fn operator(&mut self, c: char, next: Option<char>, i: usize) -> Option<usize> {
        Some(match (c, next) {
            ('(', _) => {
                self.finish_word();
                self.open(Kind::Paren, None, i + 1);
                1
            }
            (')', _) => {
                if matches!(self.top_kind(), Kind::Dollar | Kind::ProcSub | Kind::Paren) {
                    self.close(i);
                } else {
                    self.end_command(Link::Seq);
                }
                1
            }
            (';', _) => {
                self.end_command(Link::Seq);
                if next == Some(';') {
                    2
                } else {
                    1
                }
            }
            ('&', Some('&')) => {
                self.end_command(Link::And);
                2
            }
            ('&', Some('>')) => self.redirect(i),
            ('&', _) => {
                self.end_command(Link::Seq);
                1
            }
            ('|', Some('|')) => {
                self.end_command(Link::Or);
                2
            }
            ('|', _) => {
                self.end_command(Link::Pipe);
                if next == Some('&') {
                    2
                } else {
                    1
                }
            }
            ('<' | '>', Some('(')) => {
                self.finish_word();
                self.open(Kind::ProcSub, Some(i), i + 2);
                2
            }
            ('<' | '>', _) => self.redirect(i),
            _ => return None,
        })
    }

    /// Lexes a redirection operator at `i`; returns its length.
    fn redirect(&mut self, i: usize) -> usize {
        let bytes = self.text.as_bytes();
        // `2>` and `2>&1`: the digits name a descriptor, not a word.
        if let Some(f) = self.stack.last_mut() {
            if !f.word.is_empty() && f.word.bytes().all(|b| b.is_ascii_digit()) && f.word_end == i {
                f.word.clear();
                f.word_start = None;
            }
        }
        self.finish_word();
        let len = bytes[i..]
            .iter()
            .take_while(|&&b| matches!(b, b'<' | b'>' | b'&' | b'|'))
            .count()
            .max(1);
        let op = self.text[i..i + len].to_string();
        if let Some(f) = self.stack.last_mut() {
            f.redirect = Some(op);
        }
        len
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn words(l: &Lexed) -> Vec<Vec<String>> {
        l.commands
            .iter()
            .filter(|c| !c.words.is_empty())
            .map(|c| c.words.iter().map(|w| w.text.clone()).collect())
            .collect()
    }

    #[test]
    fn splits_on_operators_and_keeps_links() {
        let l = lex("cd build && rm -rf ../* ; ls | wc -l || true");
        assert_eq!(
            words(&l),
            vec![
                vec!["cd", "build"],
                vec!["rm", "-rf", "../*"],
                vec!["ls"],
                vec!["wc", "-l"],
                vec!["true"]
            ]
        );
        let links: Vec<Link> = l
            .commands
            .iter()
            .filter(|c| !c.words.is_empty())
            .map(|c| c.link)
            .collect();
        assert_eq!(
            links,
            vec![Link::First, Link::And, Link::Seq, Link::Pipe, Link::Or]
        );
    }

    #[test]
    fn removes_quotes_and_escapes() {
        let l = lex(r#"bash -c 'rm -rf ~/x' "a b" \r\m"#);
        assert_eq!(
            words(&l),
            vec![vec!["bash", "-c", "rm -rf ~/x", "a b", "rm"]]
        );
        assert_eq!(l.quoted.len(), 2);
        let (s, e) = l.quoted[0];
        assert_eq!(&r#"bash -c 'rm -rf ~/x' "a b" \r\m"#[s..e], "rm -rf ~/x");
    }

    #[test]
    fn substitutions_become_child_commands() {
        let l = lex("kill -9 $(pgrep node) `whoami`");
        let kill = &l.commands[0];
        assert_eq!(kill.words[0].text, "kill");
        assert_eq!(kill.subs.len(), 2);
        assert_eq!(l.commands[kill.subs[0]].words[0].text, "pgrep");
        assert_eq!(l.commands[kill.subs[1]].words[0].text, "whoami");
        assert!(kill.words[2].text.contains('$'));
    }

    #[test]
    fn apostrophes_do_not_open_quotes() {
        let l = lex("Don't worry; rm -rf ~/projects");
        assert_eq!(words(&l)[1], vec!["rm", "-rf", "~/projects"]);
    }

    #[test]
    fn fences_and_redirects() {
        let l = lex("```bash\ncat /dev/zero > /dev/sda 2>&1\n```");
        let cat = l
            .commands
            .iter()
            .find(|c| c.words.first().is_some_and(|w| w.text == "cat"))
            .unwrap();
        assert_eq!(cat.redirects[0].0, ">");
        assert_eq!(cat.redirects[0].1.text, "/dev/sda");
        assert!(cat.nested);
    }

    #[test]
    fn unbalanced_input_lexes() {
        let l = lex("echo 'unterminated $(( `x");
        assert!(!l.commands.is_empty());
        let deep = "$(".repeat(10_000) + "rm -rf /" + &")".repeat(10_000);
        let l = lex(&deep);
        assert!(l
            .commands
            .iter()
            .any(|c| c.words.first().is_some_and(|w| w.text == "rm")));
    }
}
