//! A JSON tree that keeps its keys in insertion order, so exports list metrics in
//! GenAI-Perf's order and stats as avg, min, max, p1..p99, std (serde_json's map sorts keys
//! unless a feature outside this crate's control is on).

use serde_json::Value;

/// A value: a plain JSON value (numbers, strings, caller-supplied objects) or an ordered
/// object.
pub(crate) enum Node {
    Leaf(Value),
    Obj(Vec<(String, Node)>),
    /// An array of ordered values.
    List(Vec<Node>),
}

impl Node {
    pub fn obj() -> Node {
        Node::Obj(Vec::new())
    }

    /// Adds `key: value` to an object (ignored on a leaf).
    pub fn push(&mut self, key: &str, value: Node) {
        if let Node::Obj(entries) = self {
            entries.push((key.to_string(), value));
        }
    }

    /// Adds `key: value` for a plain value.
    pub fn put(&mut self, key: &str, value: impl Into<Value>) {
        self.push(key, Node::Leaf(value.into()));
    }

    /// Compact text on one line (JSON Lines).
    pub fn compact(&self) -> String {
        let mut out = String::new();
        self.write_compact(&mut out);
        out
    }

    /// Pretty text, two-space indent, no trailing newline.
    pub fn pretty(&self) -> String {
        let mut out = String::new();
        self.write_pretty(&mut out, 0);
        out
    }

    fn write_compact(&self, out: &mut String) {
        match self {
            Node::Leaf(v) => out.push_str(&v.to_string()),
            Node::Obj(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push(':');
                    v.write_compact(out);
                }
                out.push('}');
            }
            Node::List(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write_compact(out);
                }
                out.push(']');
            }
        }
    }

    fn write_pretty(&self, out: &mut String, depth: usize) {
        let pad = |n: usize| "  ".repeat(n);
        match self {
            Node::Leaf(v) => {
                let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into());
                // Nested lines of a caller's object follow this writer's indentation.
                out.push_str(&text.replace('\n', &format!("\n{}", pad(depth))));
            }
            Node::Obj(entries) if entries.is_empty() => out.push_str("{}"),
            Node::Obj(entries) => {
                out.push_str("{\n");
                for (i, (k, v)) in entries.iter().enumerate() {
                    out.push_str(&pad(depth + 1));
                    out.push_str(&Value::from(k.as_str()).to_string());
                    out.push_str(": ");
                    v.write_pretty(out, depth + 1);
                    if i + 1 < entries.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                out.push_str(&pad(depth));
                out.push('}');
            }
            Node::List(items) if items.is_empty() => out.push_str("[]"),
            Node::List(items) => {
                out.push_str("[\n");
                for (i, v) in items.iter().enumerate() {
                    out.push_str(&pad(depth + 1));
                    v.write_pretty(out, depth + 1);
                    if i + 1 < items.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                out.push_str(&pad(depth));
                out.push(']');
            }
        }
    }
}

/// A finite float as a JSON number; NaN and infinities become null.
pub(crate) fn num(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_round_trips() {
        let mut inner = Node::obj();
        inner.put("z", 1);
        inner.put("a", num(2.5));
        let mut root = Node::obj();
        root.push("second", inner);
        root.put("first", serde_json::json!({"k": [1, 2]}));
        root.put("bad", num(f64::NAN));
        root.push("empty", Node::obj());
        root.push("list", Node::List(vec![Node::obj(), Node::Leaf(1.into())]));
        assert_eq!(
            root.compact(),
            r#"{"second":{"z":1,"a":2.5},"first":{"k":[1,2]},"bad":null,"empty":{},"list":[{},1]}"#
        );
        let pretty = root.pretty();
        assert!(pretty.starts_with("{\n  \"second\": {\n    \"z\": 1,\n    \"a\": 2.5\n  },"));
        assert!(pretty.contains("\"first\": {\n    \"k\": [\n      1,\n      2\n    ]\n  }"));
        let back: Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(back["second"]["a"], 2.5);
        assert_eq!(back["empty"], serde_json::json!({}));
        assert_eq!(back["list"], serde_json::json!([{}, 1]));
    }
}
