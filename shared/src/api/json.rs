//! The strict JSON reader every request body goes through (SC-SEC-03).
//!
//! An approver countersigns exactly what the agent sent, and every record must load again: so a
//! body is refused — before anything is stored — when it nests deeper than [`MAX_DEPTH`], repeats
//! an object key (a plain parse keeps the last one silently), or holds a number that would not
//! survive as written (`123456789012345678901234567890` would become `1.2345678901234568e29`).
//! serde_json does the parsing; a visitor checks structure and keys on the way, and each number
//! is compared with its own text, taken from the bytes in document order.

use crate::Error;
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::{cell::RefCell, collections::HashSet, fmt};

/// Deepest nesting of objects and arrays accepted in a body (the body object is level 1).
pub const MAX_DEPTH: usize = 32;

/// Parse a request body strictly; a refusal names where it is (`param`, e.g. `args.items[2]`).
pub fn parse(bytes: &[u8]) -> Result<Value, Error> {
    let state = RefCell::new(State {
        numbers: number_texts(bytes).into_iter(),
        path: Vec::new(),
        refusal: None,
    });
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Node { state: &state }
        .deserialize(&mut de)
        .and_then(|value| de.end().map(|()| value));
    match (parsed, state.into_inner().refusal) {
        (_, Some(refusal)) => Err(refusal),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(Error::validation("body", format!("malformed JSON: {e}"))),
    }
}

struct State<'b> {
    /// The text of every number outside strings, in document order: serde visits them in the
    /// same order.
    numbers: std::vec::IntoIter<&'b str>,
    path: Vec<String>,
    refusal: Option<Error>,
}

impl State<'_> {
    fn param(&self) -> String {
        if self.path.is_empty() {
            return "body".to_owned();
        }
        self.path.iter().fold(String::new(), |mut p, seg| {
            if !p.is_empty() && !seg.starts_with('[') {
                p.push('.');
            }
            p.push_str(seg);
            p
        })
    }

    fn refuse<E: serde::de::Error>(&mut self, message: String) -> E {
        let error = Error::validation(&self.param(), message);
        let text = error.to_string();
        self.refusal.get_or_insert(error);
        E::custom(text)
    }
}

struct Node<'s, 'b> {
    state: &'s RefCell<State<'b>>,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl Node<'_, '_> {
    fn number<E: serde::de::Error>(&self, value: Value) -> Result<Value, E> {
        let mut state = self.state.borrow_mut();
        let text = state.numbers.next().unwrap_or_default();
        // An integer written without a fraction or exponent must stay an integer: one past 64
        // bits would become a float whose shortest text may match the decimal while its value
        // does not (found by fuzzing: 888888888 followed by 70 zeros).
        let integer_text = text
            .trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit());
        // (`-0` reads as the float -0.0, which is exact.)
        let integer_value =
            value.as_i64().is_some() || value.as_u64().is_some() || value.as_f64() == Some(0.0);
        if integer_text && !integer_value {
            Err(state.refuse(format!(
                "the number {text} cannot be kept exactly (integers must fit 64 bits; decimals must survive a 64-bit float)"
            )))
        } else if same_decimal(text, &value.to_string()) {
            Ok(value)
        } else {
            Err(state.refuse(format!(
                "the number {text} cannot be kept exactly (integers must fit 64 bits; decimals must survive a 64-bit float)"
            )))
        }
    }

    /// Enter an object or array; refused past [`MAX_DEPTH`].
    fn enter<E: serde::de::Error>(&self) -> Result<(), E> {
        let mut state = self.state.borrow_mut();
        if state.path.len() + 1 > MAX_DEPTH {
            return Err(state.refuse(format!(
                "the body nests deeper than {MAX_DEPTH} levels of objects and arrays"
            )));
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.number(Value::from(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.number(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        // serde_json yields only finite floats.
        self.number(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut items = Vec::new();
        // serde has no "has next" without reading it: the index is pushed first, the element
        // read under it.
        loop {
            self.state
                .borrow_mut()
                .path
                .push(format!("[{}]", items.len()));
            let next = seq.next_element_seed(Node { state: self.state })?;
            self.state.borrow_mut().path.pop();
            match next {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut object = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                self.state.borrow_mut().path.push(key.clone());
                return Err(self
                    .state
                    .borrow_mut()
                    .refuse(format!("the key {key:?} appears twice in one object")));
            }
            self.state.borrow_mut().path.push(key.clone());
            let value = map.next_value_seed(Node { state: self.state })?;
            self.state.borrow_mut().path.pop();
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// The text of every number token outside strings, in order. Run over any bytes: for
/// malformed JSON the parse fails anyway.
fn number_texts(bytes: &[u8]) -> Vec<&str> {
    let mut numbers = Vec::new();
    let (mut i, mut in_string) = (0, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < bytes.len()
                && matches!(bytes[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
            {
                i += 1;
            }
            numbers.push(std::str::from_utf8(&bytes[start..i]).unwrap_or_default());
            continue;
        }
        i += 1;
    }
    numbers
}

/// Do two JSON number texts name the same decimal value? (`1.50` = `1.5`, `1e2` = `100.0`.)
fn same_decimal(a: &str, b: &str) -> bool {
    matches!((decimal(a), decimal(b)), (Some(x), Some(y)) if x == y)
}

/// A number's value as (negative, significant digits, exponent) with value = 0.digits × 10^exp;
/// no leading or trailing zeros in `digits`; zero is `(false, "", 0)`.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, unsigned) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exp) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, e.parse::<i64>().ok()?),
        None => (unsigned, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int.is_empty() || !(int.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = int.chars().chain(frac.chars()).collect();
    let leading = digits.len() - digits.trim_start_matches('0').len();
    let significant = digits.trim_start_matches('0').trim_end_matches('0');
    if significant.is_empty() {
        return Some((false, String::new(), 0));
    }
    let exponent = (int.len() as i64 - leading as i64).checked_add(exp)?;
    Some((negative, significant.to_owned(), exponent))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(body: &str) -> (String, String) {
        match parse(body.as_bytes()) {
            Err(Error::Validation { param, message }) => (param, message),
            other => panic!("{body} should be refused, got {other:?}"),
        }
    }

    fn nested(depth: usize) -> String {
        // `depth` levels in all: the body object, then objects under "a".
        format!("{}1{}", "{\"a\":".repeat(depth), "}".repeat(depth))
    }

    #[test]
    fn sc_sec_03_each_hostile_shape_is_refused_with_its_place() {
        let cases: &[(&str, &str, &str)] = &[
            (
                r#"{"args":{"n":123456789012345678901234567890}}"#,
                "args.n",
                "cannot be kept exactly",
            ),
            (r#"{"args":{"n":0.30000000000000001}}"#, "args.n", "exactly"),
            (
                r#"{"args":{"n":-18446744073709551617}}"#,
                "args.n",
                "exactly",
            ),
            (r#"{"args":{"n":1e-400}}"#, "args.n", "exactly"),
            // Integers past 64 bits, even where a float's shortest text names the same decimal.
            (
                r#"{"args":{"n":100000000000000000000}}"#,
                "args.n",
                "exactly",
            ),
            (
                r#"{"args":{"n":8888888880000000000000000000000000000000000000000000000000000000000000000000000}}"#,
                "args.n",
                "exactly",
            ),
            (
                r#"{"args":{"xs":[1, 2, 1e99999999999999999999]}}"#,
                "body",
                "malformed",
            ),
            (r#"{"args":{"a":1,"a":2}}"#, "args.a", "appears twice"),
            (r#"{"tool":"x","tool":"x"}"#, "tool", "appears twice"),
            (
                r#"{"args":{"xs":[{"k":1,"k":1}]}}"#,
                "args.xs[0].k",
                "twice",
            ),
            (r#"{"a":1} {"b":2}"#, "body", "malformed"),
        ];
        for (body, param, message) in cases {
            let (p, m) = refused(body);
            assert_eq!(&p, param, "{body}: {m}");
            assert!(m.contains(message), "{body}: {m}");
        }
    }

    #[test]
    fn sc_sec_03_exact_numbers_pass_unchanged() {
        let body = r#"{"n":[0,-0,1,-1,18446744073709551615,-9223372036854775808,0.1,1.5,1.50,1e2,2.5e-3,1e20,"12345678901234567890123"]}"#;
        let value = parse(body.as_bytes()).unwrap();
        assert_eq!(
            value["n"].to_string(),
            r#"[0,-0.0,1,-1,18446744073709551615,-9223372036854775808,0.1,1.5,1.5,100.0,0.0025,1e+20,"12345678901234567890123"]"#
        );
    }

    /// Found by fuzzing (`request_body`, 1 Dec 2026): `1253.80e92` was accepted, but the text it
    /// re-serialized to (`1.2538e95`) was refused — serde_json's default float reader is not
    /// correctly rounded, so two spellings of one decimal read as floats a bit apart, and a
    /// stored record could hold a number its own output no longer matches.
    #[test]
    fn sc_sec_03_an_accepted_number_reads_back_equal() {
        for n in [
            "1253.80e92",
            "1.2538e95",
            "9007199254740993.5",
            "2.2250738585072011e-308",
        ] {
            let body = format!(r#"{{"n":{n}}}"#);
            let Ok(value) = parse(body.as_bytes()) else {
                continue; // refused as inexact: nothing to read back
            };
            let again = parse(&serde_json::to_vec(&value).unwrap())
                .unwrap_or_else(|e| panic!("{n}: its own output {} is refused: {e:?}", value["n"]));
            assert_eq!(value, again, "{n}");
        }
        // The fuzzer's number is exact as a float: it must be accepted, not refused.
        assert!(parse(br#"{"n":1253.80e92}"#).is_ok());
    }

    #[test]
    fn sc_sec_03_depth_is_bounded_at_32() {
        assert!(parse(nested(MAX_DEPTH).as_bytes()).is_ok());
        for depth in [MAX_DEPTH + 1, 124, 1000] {
            let (param, message) = refused(&nested(depth));
            assert!(message.contains("deeper than 32"), "{message}");
            assert_eq!(param, vec!["a"; MAX_DEPTH].join("."));
        }
        let arrays = format!("{{\"a\":{}{}}}", "[".repeat(40), "]".repeat(40));
        assert!(refused(&arrays).1.contains("deeper"));
    }

    #[test]
    fn strings_that_look_like_numbers_are_not_numbers() {
        let value = parse(br#"{"s":"1e999 \"2\" -3","n":4}"#).unwrap();
        assert_eq!(value, serde_json::json!({"s":"1e999 \"2\" -3","n":4}));
    }
}
