//! The oslo.policy rule language: `role:admin or (not rule:x and a:%(b)s)`.
//!
//! oslo.policy tokenizes on whitespace and reduces greedily with a
//! shift-reduce automaton; its precedence (`not` > `and` > `or`) and its
//! failure modes fall out of that automaton, so we run the same one rather
//! than a textbook grammar. Anything oslo cannot parse becomes [`Check::False`]
//! (fail closed) and is reported as a warning.

use crate::checks::Check;

/// A parsed rule plus the problems oslo.policy would have logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub check: Check,
    pub warnings: Vec<String>,
}

/// Parses a rule written in the policy language. Never fails: unparsable
/// rules become [`Check::False`] with a warning, as in oslo.policy.
pub fn parse_rule(rule: &str) -> Parsed {
    let mut warnings = Vec::new();
    // The empty rule allows everything; a blank but non-empty one does not.
    if rule.is_empty() {
        return Parsed { check: Check::True, warnings };
    }
    let mut stack: Vec<Token> = Vec::new();
    for token in tokenize(rule, &mut warnings) {
        stack.push(token);
        reduce(&mut stack);
    }
    let check = match (stack.pop(), stack.is_empty()) {
        (Some(Token::Check(check)), true) => check,
        (Some(Token::AndExpr(items)), true) => Check::And(items),
        (Some(Token::OrExpr(items)), true) => Check::Or(items),
        _ => {
            warnings.push(format!("Failed to understand rule {rule}"));
            Check::False
        }
    };
    Parsed { check, warnings }
}

/// Parses the legacy list-of-lists form: the outer list is OR-ed, each inner
/// list AND-ed, each element a single check such as `role:admin` (a bare
/// string in the outer list is a one-element inner list). An empty rule
/// allows; a rule made only of empty inner lists denies.
pub fn parse_list_rule<S: AsRef<str>>(rule: &[Vec<S>]) -> Parsed {
    let mut warnings = Vec::new();
    if rule.is_empty() {
        return Parsed { check: Check::True, warnings };
    }
    let mut alternatives: Vec<Check> = rule
        .iter()
        .filter(|inner| !inner.is_empty())
        .map(|inner| {
            let mut all: Vec<Check> = inner.iter().map(|item| parse_check(item.as_ref(), &mut warnings)).collect();
            if all.len() == 1 {
                all.remove(0)
            } else {
                Check::And(all)
            }
        })
        .collect();
    let check = match alternatives.len() {
        0 => Check::False,
        1 => alternatives.remove(0),
        _ => Check::Or(alternatives),
    };
    Parsed { check, warnings }
}

/// Parses one `kind:match` check (no operators), as oslo's `_parse_check`.
fn parse_check(text: &str, warnings: &mut Vec<String>) -> Check {
    match text {
        "!" => return Check::False,
        "@" => return Check::True,
        _ => {}
    }
    let Some((kind, pattern)) = text.split_once(':') else {
        warnings.push(format!("Failed to understand rule {text}"));
        return Check::False;
    };
    match kind {
        "http" | "https" => {
            warnings.push(format!("External check {text} is not supported; it always denies"));
            Check::External { kind: kind.to_owned(), url: pattern.to_owned() }
        }
        "rule" => Check::Rule(pattern.to_owned()),
        "role" => Check::Role(pattern.to_owned()),
        _ => Check::Generic { kind: kind.to_owned(), pattern: pattern.to_owned() },
    }
}

/// Stack symbols of the shift-reduce parser.
#[derive(Debug)]
enum Token {
    LParen,
    RParen,
    And,
    Or,
    Not,
    /// A bare quoted string; nothing reduces it, so it makes the rule fail.
    Str,
    Check(Check),
    AndExpr(Vec<Check>),
    OrExpr(Vec<Check>),
}

/// Python's `str.isspace()`, which is what oslo's `\s+` split uses.
fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn tokenize(rule: &str, warnings: &mut Vec<String>) -> Vec<Token> {
    let mut tokens = Vec::new();
    for word in rule.split(is_py_space).filter(|w| !w.is_empty()) {
        // Parentheses only count at the edges of a word: `%(key)s` keeps its own.
        let inner = word.trim_start_matches('(');
        tokens.extend(std::iter::repeat_with(|| Token::LParen).take(word.len() - inner.len()));
        if inner.is_empty() {
            continue;
        }
        let core = inner.trim_end_matches(')');
        match core.to_lowercase().as_str() {
            "and" => tokens.push(Token::And),
            "or" => tokens.push(Token::Or),
            "not" => tokens.push(Token::Not),
            _ if core.is_empty() => {}
            _ if is_quoted(inner) => tokens.push(Token::Str),
            _ => tokens.push(Token::Check(parse_check(core, warnings))),
        }
        tokens.extend(std::iter::repeat_with(|| Token::RParen).take(inner.len() - core.len()));
    }
    tokens
}

/// oslo tests the quotes before stripping trailing parentheses.
fn is_quoted(word: &str) -> bool {
    let mut chars = word.chars();
    match (chars.next(), chars.next_back()) {
        (Some(first), Some(last)) => first == last && (first == '"' || first == '\''),
        _ => false,
    }
}

/// Applies reductions to the top of the stack until none matches.
fn reduce(stack: &mut Vec<Token>) {
    while reduce_once(stack) {}
}

fn reduce_once(stack: &mut Vec<Token>) -> bool {
    let n = stack.len();
    if n >= 3 {
        let reducible = matches!(
            (&stack[n - 3], &stack[n - 2], &stack[n - 1]),
            (Token::LParen, Token::Check(_) | Token::AndExpr(_) | Token::OrExpr(_), Token::RParen)
                | (Token::Check(_) | Token::AndExpr(_) | Token::OrExpr(_), Token::And | Token::Or, Token::Check(_))
        );
        if reducible {
            let c = stack.pop();
            let b = stack.pop();
            let a = stack.pop();
            if let (Some(a), Some(b), Some(c)) = (a, b, c) {
                stack.push(combine(a, b, c));
                return true;
            }
        }
    }
    if n >= 2 && matches!((&stack[n - 2], &stack[n - 1]), (Token::Not, Token::Check(_))) {
        if let Some(Token::Check(check)) = stack.pop() {
            stack.pop();
            stack.push(Token::Check(Check::Not(Box::new(check))));
            return true;
        }
    }
    false
}

/// Reduces three stack symbols already known to match a rule.
fn combine(a: Token, b: Token, c: Token) -> Token {
    match (a, b, c) {
        (Token::LParen, Token::Check(check), Token::RParen) => Token::Check(check),
        (Token::LParen, Token::AndExpr(items), Token::RParen) => Token::Check(Check::And(items)),
        (Token::LParen, Token::OrExpr(items), Token::RParen) => Token::Check(Check::Or(items)),
        (Token::Check(left), Token::And, Token::Check(right)) => Token::AndExpr(vec![left, right]),
        (Token::AndExpr(mut items), Token::And, Token::Check(right)) => {
            items.push(right);
            Token::AndExpr(items)
        }
        // `A or B and C`: the `or` was reduced greedily, so `and` binds to
        // its last operand after the fact.
        (Token::OrExpr(mut items), Token::And, Token::Check(right)) => {
            let last = match items.pop() {
                Some(Check::And(mut all)) => {
                    all.push(right);
                    Check::And(all)
                }
                Some(other) => Check::And(vec![other, right]),
                None => right,
            };
            items.push(last);
            Token::OrExpr(items)
        }
        (Token::Check(left), Token::Or, Token::Check(right)) => Token::OrExpr(vec![left, right]),
        (Token::AndExpr(all), Token::Or, Token::Check(right)) => Token::OrExpr(vec![Check::And(all), right]),
        (Token::OrExpr(mut items), Token::Or, Token::Check(right)) => {
            items.push(right);
            Token::OrExpr(items)
        }
        // Unreachable by construction (`reduce_once` only passes matches);
        // a poisoned symbol keeps the parse failing closed.
        _ => Token::Str,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(rule: &str) -> Check {
        parse_rule(rule).check
    }

    fn role(name: &str) -> Check {
        Check::Role(name.into())
    }

    fn not(check: Check) -> Check {
        Check::Not(Box::new(check))
    }

    #[test]
    fn atoms() {
        assert_eq!(parse(""), Check::True);
        assert_eq!(parse("@"), Check::True);
        assert_eq!(parse("!"), Check::False);
        assert_eq!(parse("rule:admin_api"), Check::Rule("admin_api".into()));
        assert_eq!(parse("role:admin"), role("admin"));
        assert_eq!(
            parse("project_id:%(project_id)s"),
            Check::Generic { kind: "project_id".into(), pattern: "%(project_id)s".into() }
        );
        // Only the first colon splits.
        assert_eq!(parse("role:compute:admin"), Check::Role("compute:admin".into()));
        assert_eq!(parse("system_scope:all"), Check::Generic { kind: "system_scope".into(), pattern: "all".into() });
    }

    #[test]
    fn precedence_not_and_or() {
        let (a, b, c, d) = (role("a"), role("b"), role("c"), role("d"));
        assert_eq!(
            parse("role:a or role:b and role:c"),
            Check::Or(vec![a.clone(), Check::And(vec![b.clone(), c.clone()])])
        );
        assert_eq!(
            parse("role:a and role:b or role:c and role:d"),
            Check::Or(vec![Check::And(vec![a.clone(), b.clone()]), Check::And(vec![c.clone(), d.clone()])])
        );
        assert_eq!(
            parse("role:a or role:b and role:c and role:d or role:a"),
            Check::Or(vec![a.clone(), Check::And(vec![b.clone(), c.clone(), d.clone()]), a.clone()])
        );
        assert_eq!(parse("not role:a and role:b"), Check::And(vec![not(a.clone()), b.clone()]));
        assert_eq!(parse("role:a or not role:b"), Check::Or(vec![a.clone(), not(b.clone())]));
        assert_eq!(parse("not not role:a"), not(not(a.clone())));
        // Keywords are case-insensitive.
        assert_eq!(parse("role:a AND role:b"), Check::And(vec![a, b]));
    }

    #[test]
    fn parentheses() {
        let (a, b, c) = (role("a"), role("b"), role("c"));
        assert_eq!(
            parse("(role:a or role:b) and role:c"),
            Check::And(vec![Check::Or(vec![a.clone(), b.clone()]), c.clone()])
        );
        assert_eq!(parse("not (role:a or role:b)"), not(Check::Or(vec![a.clone(), b.clone()])));
        assert_eq!(parse("((role:a))"), a.clone());
        assert_eq!(
            parse("( role:a and (role:b or role:c) )"),
            Check::And(vec![a.clone(), Check::Or(vec![b.clone(), c.clone()])])
        );
        // `%(...)s` parentheses are part of the check, not grouping.
        assert_eq!(
            parse("(project_id:%(project_id)s)"),
            Check::Generic { kind: "project_id".into(), pattern: "%(project_id)s".into() }
        );
    }

    #[test]
    fn failures_are_false_with_warning() {
        for rule in [
            "(role:a",
            "role:a)",
            "role:a and",
            "or role:a",
            "role:a role:b",
            "not",
            "   ",
            "'quoted'",
            "role:a or \"x y\"",
        ] {
            let parsed = parse_rule(rule);
            assert_eq!(parsed.check, Check::False, "rule {rule:?}");
            assert!(!parsed.warnings.is_empty(), "rule {rule:?}");
        }
        // A check without a colon is false on its own but the rule still parses.
        let parsed = parse_rule("admin or role:a");
        assert_eq!(parsed.check, Check::Or(vec![Check::False, role("a")]));
        assert_eq!(parsed.warnings.len(), 1);
    }

    #[test]
    fn quoted_literals_in_checks() {
        assert_eq!(
            parse("'Member':%(role.name)s"),
            Check::Generic { kind: "'Member'".into(), pattern: "%(role.name)s".into() }
        );
        assert_eq!(
            parse("True:%(user.enabled)s"),
            Check::Generic { kind: "True".into(), pattern: "%(user.enabled)s".into() }
        );
        assert_eq!(parse("role:'admin'"), role("'admin'"));
    }

    #[test]
    fn list_rules() {
        let empty: [Vec<&str>; 0] = [];
        assert_eq!(parse_list_rule(&empty).check, Check::True);
        assert_eq!(parse_list_rule(&[Vec::<&str>::new()]).check, Check::False);
        assert_eq!(parse_list_rule(&[vec!["role:a"]]).check, role("a"));
        assert_eq!(
            parse_list_rule(&[vec!["role:a", "role:b"], vec!["role:c"]]).check,
            Check::Or(vec![Check::And(vec![role("a"), role("b")]), role("c")])
        );
        // Elements are single checks: operators are not interpreted.
        let parsed = parse_list_rule(&[vec!["role:a or role:b"]]);
        assert_eq!(parsed.check, Check::Role("a or role:b".into()));
    }
}
