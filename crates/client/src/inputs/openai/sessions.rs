//! Session mode's inputs (`--session-concurrency`): the data's entries
//! grouped into conversations by their `session_id`, and the chat history a conversation
//! carries from turn to turn.
//!
//! Turn k's `messages` is every message of turns 1..k-1, each followed by the assistant's
//! reply to it, then turn k's own messages. The body is spliced as text, so the payload's own
//! key order and spelling stay as the file wrote them (serde_json's maps would sort keys).

use std::collections::HashMap;

use serde_json::Value;

use super::{compact, elements, members, skip_ws, PayloadEntry};
use crate::error::{Error, Result};

/// The body field holding the chat history.
const MESSAGES: &str = "messages";

/// One request of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The entry's `payload` (compact JSON object), before the history is merged in.
    pub payload: Vec<u8>,
    /// Pause after this turn's response before the next turn is sent (ms); 0 when the entry
    /// has no `delay`.
    pub delay_ms: u64,
}

/// One conversation: its turns in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub turns: Vec<Turn>,
}

/// Groups the entries by `session_id`: sessions in the order their first turn appears, turns
/// in file order. An entry without `session_id` is a usage error naming it.
pub fn group_sessions(entries: Vec<PayloadEntry>) -> Result<Vec<Session>> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut sessions: Vec<Session> = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let Some(id) = entry.session_id else {
            return Err(Error::usage(format!(
                "--input-data: entry {i} has no \"session_id\", which --session-concurrency \
                 requires"
            )));
        };
        let turn = Turn {
            payload: entry.payload,
            delay_ms: entry.delay_ms.unwrap_or(0),
        };
        match index.get(&id) {
            Some(&k) => sessions[k].turns.push(turn),
            None => {
                index.insert(id.clone(), sessions.len());
                sessions.push(Session {
                    id,
                    turns: vec![turn],
                });
            }
        }
    }
    Ok(sessions)
}

/// The conversation so far: the compact JSON text of every message sent and every reply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    messages: Vec<Vec<u8>>,
}

/// One turn's request body, and its own messages to add to the history once it is answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnBody {
    pub body: Vec<u8>,
    /// `None`: the payload has no `messages` array, so no history goes in or out of it.
    own: Option<Vec<Vec<u8>>>,
}

impl History {
    /// Messages carried so far (sent ones and replies).
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The body of the next turn: `payload` with the history put in front of its own
    /// `messages`. A payload without a `messages` array is sent unchanged.
    pub fn compose(&self, payload: &[u8]) -> TurnBody {
        if let Some(((start, end), own)) = messages_by_text(payload) {
            let mut body = Vec::with_capacity(payload.len() + self.text_len() + 2);
            body.extend_from_slice(&payload[..start]);
            body.push(b'[');
            for (k, message) in self.messages.iter().chain(own.iter()).enumerate() {
                if k > 0 {
                    body.push(b',');
                }
                body.extend_from_slice(message);
            }
            body.push(b']');
            body.extend_from_slice(&payload[end..]);
            return TurnBody {
                body,
                own: Some(own),
            };
        }
        match self.compose_by_value(payload) {
            Some(turn) => turn,
            None => TurnBody {
                body: payload.to_vec(),
                own: None,
            },
        }
    }

    /// The turn was answered with `reply`: its messages and the assistant's reply join the
    /// history.
    pub fn commit(&mut self, turn: TurnBody, reply: &str) {
        if let Some(own) = turn.own {
            self.messages.extend(own);
            self.messages.push(assistant_message(reply));
        }
    }

    fn text_len(&self) -> usize {
        self.messages.iter().map(|m| m.len() + 1).sum()
    }

    /// The text scan did not find `messages` (e.g. its key is written with an escape): the
    /// same through serde_json, whose output has sorted keys.
    fn compose_by_value(&self, payload: &[u8]) -> Option<TurnBody> {
        let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(payload) else {
            return None;
        };
        let Some(Value::Array(own)) = fields.get(MESSAGES) else {
            return None;
        };
        let own_text: Vec<Vec<u8>> = own
            .iter()
            .filter_map(|m| serde_json::to_vec(m).ok())
            .collect();
        let mut all: Vec<Value> = self
            .messages
            .iter()
            .filter_map(|m| serde_json::from_slice(m).ok())
            .collect();
        all.extend(own.iter().cloned());
        fields.insert(MESSAGES.to_string(), Value::Array(all));
        let body = serde_json::to_vec(&Value::Object(fields)).ok()?;
        Some(TurnBody {
            body,
            own: Some(own_text),
        })
    }
}

/// Where a payload's `messages` array is (byte span) and the compact text of each element.
type MessagesSpan = ((usize, usize), Vec<Vec<u8>>);

/// The span of the payload's `messages` array and the compact text of each of its elements.
fn messages_by_text(payload: &[u8]) -> Option<MessagesSpan> {
    let top = skip_ws(payload, 0);
    // The last occurrence wins, as for the parsed value.
    let (_, (start, end)) = members(payload, top)?
        .into_iter()
        .rev()
        .find(|(key, _)| *key == MESSAGES.as_bytes())?;
    let own = elements(payload, start)?
        .into_iter()
        .map(|(a, b)| compact(&payload[a..b]))
        .collect();
    Some(((start, end), own))
}

/// `{"role":"assistant","content":"<reply>"}`.
fn assistant_message(reply: &str) -> Vec<u8> {
    let content = Value::String(reply.to_string()).to_string();
    format!("{{\"role\":\"assistant\",\"content\":{content}}}").into_bytes()
}

/// The assistant's text in a whole (non-streamed) answer: `choices[0].message.content`
/// (chat) or `choices[0].text` (completions); empty when there is none.
pub fn reply_of_body(body: &[u8]) -> String {
    choice_text(body, "message").unwrap_or_default()
}

/// The text one streamed event adds: `choices[0].delta.content` (chat) or `choices[0].text`
/// (completions). `None` for events without text (role-only deltas, usage, `[DONE]`).
pub fn reply_of_event(data: &[u8]) -> Option<String> {
    choice_text(data, "delta")
}

fn choice_text(json: &[u8], holder: &str) -> Option<String> {
    let value: Value = serde_json::from_slice(json).ok()?;
    let choice = value.get("choices")?.get(0)?;
    let text = match choice.get(holder) {
        Some(part) => part.get("content")?,
        None => choice.get("text")?,
    };
    text.as_str().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: Option<&str>, payload: &str, delay: Option<u64>) -> PayloadEntry {
        PayloadEntry {
            payload: payload.as_bytes().to_vec(),
            session_id: id.map(str::to_string),
            delay_ms: delay,
            ..PayloadEntry::default()
        }
    }

    #[test]
    fn entries_group_by_session_in_file_order() {
        let entries = vec![
            entry(Some("a"), "{\"n\":1}", Some(5)),
            entry(Some("b"), "{\"n\":2}", None),
            entry(Some("a"), "{\"n\":3}", None),
        ];
        let got = group_sessions(entries).unwrap();
        let ids: Vec<&str> = got.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(got[0].turns.len(), 2);
        assert_eq!(got[0].turns[0].delay_ms, 5);
        assert_eq!(got[0].turns[1].payload, b"{\"n\":3}");
        assert_eq!(got[0].turns[1].delay_ms, 0, "a missing delay is no pause");
        let err = group_sessions(vec![entry(None, "{}", None)]).unwrap_err();
        assert!(err.msg.contains("entry 0 has no \"session_id\""), "{err}");
        assert_eq!(err.exit_code(), 99);
    }

    #[test]
    fn history_grows_turn_by_turn_keeping_key_order() {
        let mut history = History::default();
        let first = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
        let turn = history.compose(first);
        assert_eq!(turn.body, first.to_vec(), "the first turn goes as written");
        history.commit(turn, "hello \"you\"");
        assert_eq!(history.len(), 2);
        let second = br#"{"model":"m","messages":[{"role":"user","content":"more"}],"z":1}"#;
        let turn = history.compose(second);
        let want = concat!(
            r#"{"model":"m","messages":[{"role":"user","content":"hi"},"#,
            r#"{"role":"assistant","content":"hello \"you\""},"#,
            r#"{"role":"user","content":"more"}],"z":1}"#
        );
        assert_eq!(String::from_utf8(turn.body.clone()).unwrap(), want);
        history.commit(turn, "ok");
        assert_eq!(history.len(), 4);
    }

    #[test]
    fn payloads_without_messages_or_with_escaped_keys() {
        let mut history = History::default();
        let turn = history.compose(br#"{"prompt":"x"}"#);
        assert_eq!(turn.body, br#"{"prompt":"x"}"#.to_vec());
        history.commit(turn, "ignored");
        assert!(history.is_empty(), "no messages: nothing to carry");
        // `messages` spelt with an escape: found through serde_json (keys come out sorted).
        let escaped = br#"{"stream":false,"m\u0065ssages":[{"content":"a","role":"user"}]}"#;
        let turn = history.compose(escaped);
        assert_eq!(
            turn.body,
            br#"{"messages":[{"content":"a","role":"user"}],"stream":false}"#.to_vec()
        );
        history.commit(turn, "b");
        let turn = history.compose(br#"{"messages":[]}"#);
        assert_eq!(
            String::from_utf8(turn.body).unwrap(),
            r#"{"messages":[{"content":"a","role":"user"},{"role":"assistant","content":"b"}]}"#
        );
        // Not an array: sent unchanged.
        let turn = history.compose(br#"{"messages":"x"}"#);
        assert_eq!(turn.body, br#"{"messages":"x"}"#.to_vec());
    }

    #[test]
    fn odd_payload_text_never_panics() {
        let mut history = History::default();
        history.commit(history.compose(br#"{"messages":[]}"#), "r");
        let odd: &[&[u8]] = &[
            b"",
            b"{",
            b"{\"messages\":[",
            b"{\"messages\":[1,",
            b"{\"messages\"",
            b"{\"messages\":[\"\\",
            b"\xff\xfe",
            b"[]",
        ];
        for text in odd {
            let turn = history.compose(text);
            assert!(!turn.body.is_empty() || text.is_empty());
        }
    }

    #[test]
    fn reply_text_of_answers_and_events() {
        let cases: &[(&[u8], &str)] = &[
            (
                br#"{"choices":[{"message":{"role":"assistant","content":" a b"}}]}"#,
                " a b",
            ),
            (br#"{"choices":[{"text":" c"}]}"#, " c"),
            (br#"{"choices":[]}"#, ""),
            (b"not json", ""),
            (br#"{"choices":[{"message":{"content":null}}]}"#, ""),
        ];
        for &(body, want) in cases {
            assert_eq!(
                reply_of_body(body),
                want,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let event = br#"{"choices":[{"index":0,"delta":{"content":" the"}}]}"#;
        assert_eq!(reply_of_event(event).as_deref(), Some(" the"));
        assert_eq!(
            reply_of_event(br#"{"choices":[{"delta":{"role":"x"}}]}"#),
            None
        );
        assert_eq!(reply_of_event(br#"{"choices":[],"usage":{}}"#), None);
        assert_eq!(reply_of_event(b""), None);
    }
}
