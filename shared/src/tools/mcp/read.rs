//! Reading a downstream server's answer to one request (Streamable HTTP, docs/mcp.md "Reading
//! the answer"). A JSON body is the response. An SSE body is read as its chunks arrive, in the
//! WHATWG event-stream format (`sse-stream`: CR, LF and CRLF line ends, multi-line `data`,
//! comments, `id` and `retry`), skipping notifications, the server's own requests and responses to
//! other ids, and stops at the response to our request: a server SHOULD close the stream then, but
//! need not. Bounded both ways: one message at most `MESSAGE_CAP` bytes, the answer at most
//! `ANSWER_CAP`; past either, the answer is unread, never a success.

use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use serde_json::{json, Value};

/// The id of every request countersign sends: one request per HTTP exchange, so one id serves.
pub(super) const REQUEST_ID: u64 = 1;

/// The largest message read (the JSON body, one SSE event's data). Above the 64 KiB kept of a
/// result because a message must be read whole to know whether it is a success or an error.
pub const MESSAGE_CAP: usize = 1 << 20;

/// The most bytes read from one SSE answer, notifications included. The decoder holds at most one
/// event at a time, so this also bounds the memory one answer can take.
pub const ANSWER_CAP: usize = 4 << 20;

/// Why no response was read.
#[derive(Debug, thiserror::Error)]
pub(super) enum Unread {
    /// The connection failed, or the attempt's time ran out, while reading.
    #[error(transparent)]
    Transport(reqwest::Error),
    #[error("the answer is over {cap} bytes")]
    TooLarge { bytes: usize, cap: usize },
    /// Not JSON, not a JSON object, or not UTF-8 where the format requires it.
    #[error("the answer is not JSON-RPC")]
    Malformed,
    #[error("the answer ended without the response")]
    NoResponse,
}

impl Unread {
    /// The `detail` of the `mcp_invalid_response` it is recorded as.
    pub(super) fn detail(&self) -> Value {
        match self {
            Unread::Transport(_) => json!({"detail": "transport"}),
            Unread::TooLarge { bytes, cap } => {
                json!({"detail": "too_large", "bytes_at_least": bytes, "cap": cap})
            }
            Unread::Malformed => json!({"detail": "malformed"}),
            Unread::NoResponse => json!({"detail": "no_response"}),
        }
    }
}

/// The JSON-RPC response to our request, read from a 2xx answer.
pub(super) async fn response(response: reqwest::Response) -> Result<Value, Unread> {
    let event_stream = is_event_stream(&response);
    let chunks = futures_util::stream::try_unfold(response, |mut r| async move {
        Ok(r.chunk().await?.map(|chunk| (chunk, r)))
    })
    .map_err(Unread::Transport);
    if event_stream {
        from_events(chunks).await
    } else {
        from_json(chunks).await
    }
}

fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// A JSON body: one message, which must be our response.
async fn from_json(chunks: impl Stream<Item = Result<Bytes, Unread>>) -> Result<Value, Unread> {
    let body: Vec<Bytes> = capped(chunks, MESSAGE_CAP).try_collect().await?;
    let body = body.concat();
    if body.is_empty() {
        return Err(Unread::NoResponse);
    }
    ours(&body)?.ok_or(Unread::NoResponse)
}

/// An SSE body: events until the one that carries our response.
async fn from_events(chunks: impl Stream<Item = Result<Bytes, Unread>>) -> Result<Value, Unread> {
    let events = sse_stream::SseByteStream::new(capped(chunks, ANSWER_CAP));
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        let event = event.map_err(decoding)?;
        // An event without data dispatches nothing (a priming event: `id` and empty `data`);
        // MCP's messages are `message` events, the type an event without one has.
        let Some(data) = event.data.filter(|d| !d.is_empty()) else {
            continue;
        };
        if event.event.is_some_and(|t| !t.is_empty() && t != "message") {
            continue;
        }
        if data.len() > MESSAGE_CAP {
            return Err(Unread::TooLarge {
                bytes: data.len(),
                cap: MESSAGE_CAP,
            });
        }
        if let Some(message) = ours(data.as_bytes())? {
            return Ok(message);
        }
    }
    Err(Unread::NoResponse)
}

/// The chunks, failing once more than `cap` bytes have arrived.
fn capped(
    chunks: impl Stream<Item = Result<Bytes, Unread>>,
    cap: usize,
) -> impl Stream<Item = Result<Bytes, Unread>> {
    chunks.scan(0usize, move |read, chunk| {
        let chunk = chunk.and_then(|c| {
            *read += c.len();
            if *read > cap {
                Err(Unread::TooLarge { bytes: *read, cap })
            } else {
                Ok(c)
            }
        });
        std::future::ready(Some(chunk))
    })
}

/// The decoder's error: ours from the chunks, else the stream is not well-formed.
fn decoding(e: sse_stream::Error) -> Unread {
    match e {
        sse_stream::Error::Body(e) => e.downcast::<Unread>().map_or(Unread::Malformed, |e| *e),
        _ => Unread::Malformed,
    }
}

/// One message: our response, or `None` for anything else a server may send (a notification, a
/// request of its own — whose id may be any number — or a response to another id).
fn ours(data: &[u8]) -> Result<Option<Value>, Unread> {
    let message: Value = serde_json::from_slice(data).map_err(|_| Unread::Malformed)?;
    let Value::Object(fields) = &message else {
        return Err(Unread::Malformed);
    };
    let response = !fields.contains_key("method") && fields.get("id") == Some(&json!(REQUEST_ID));
    Ok(response.then_some(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const RESPONSE: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"structuredContent":{"ok":true}}}"#;
    const NOTIFICATION: &str = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}"#;

    fn ok() -> Result<Value, &'static str> {
        Ok(serde_json::from_str(RESPONSE).unwrap())
    }

    /// Cut into chunks of `width` bytes: every framing must survive any cut.
    fn chunked(input: &[u8], width: usize) -> impl Stream<Item = Result<Bytes, Unread>> {
        let chunks: Vec<_> = input
            .chunks(width)
            .map(|c| Ok(Bytes::copy_from_slice(c)))
            .collect();
        futures_util::stream::iter(chunks)
    }

    fn label(read: Result<Value, Unread>) -> Result<Value, &'static str> {
        read.map_err(|e| match e {
            Unread::Transport(_) => "transport",
            Unread::TooLarge { .. } => "too_large",
            Unread::Malformed => "malformed",
            Unread::NoResponse => "no_response",
        })
    }

    fn widths(input: &[u8]) -> Vec<usize> {
        let small = if input.len() > 1 << 16 { 4096 } else { 1 };
        let mut widths: Vec<usize> = [small, 2, 3, 7, 4096, input.len().max(1)]
            .into_iter()
            .filter(|w| *w >= small)
            .collect();
        widths.dedup();
        widths
    }

    /// One `message` event, its lines ended by `nl`.
    fn event(data: &str, nl: &str) -> String {
        format!("event: message{nl}data: {data}{nl}{nl}")
    }

    fn lf(data: &str) -> String {
        event(data, "\n")
    }

    /// A JSON-RPC message padded to over `size` bytes.
    fn padded(head: &str, size: usize) -> String {
        format!(
            r#"{{"jsonrpc":"2.0",{head},"params":{{"pad":"{}"}}}}"#,
            "x".repeat(size)
        )
    }

    #[tokio::test]
    async fn sse_answers_are_read_as_whatwg_frames_them_up_to_our_response() {
        // Our response's look-alike, with another result: never to be taken for it.
        let other = RESPONSE.replace("true", "false");
        let split = [
            "data:{\"jsonrpc\":\"2.0\",\n",
            "data: \"id\":1,\n",
            "data:  \"result\":{\"structuredContent\":{\"ok\":true}}}\n\n",
        ];
        let flood = lf(&padded(r#""method":"n""#, 1 << 16));
        let request = r#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"}"#;
        let cases: Vec<(&str, String, Result<Value, &str>)> = vec![
            ("LF", lf(RESPONSE), ok()),
            (
                "CRLF after notifications, as the Python SDKs frame",
                [NOTIFICATION, NOTIFICATION, RESPONSE]
                    .map(|d| event(d, "\r\n"))
                    .concat(),
                ok(),
            ),
            (
                "CR alone",
                [NOTIFICATION, RESPONSE].map(|d| event(d, "\r")).concat(),
                ok(),
            ),
            (
                "line ends mixed",
                format!("event: message\r\ndata: {NOTIFICATION}\n\rdata: {RESPONSE}\r\n\n"),
                ok(),
            ),
            (
                "no event field: a message",
                format!("data: {RESPONSE}\n\n"),
                ok(),
            ),
            (
                "an empty event field: a message",
                format!("event:\ndata: {RESPONSE}\n\n"),
                ok(),
            ),
            (
                "data over lines, with and without the space",
                split.concat(),
                ok(),
            ),
            (
                "a BOM, comments, id and retry, a priming event",
                format!(
                    "\u{feff}: hi\nid: 0\nretry: 1000\ndata:\n\n: ping\r\nid: 1\n{}",
                    lf(RESPONSE)
                ),
                ok(),
            ),
            (
                "another event type is not ours",
                format!("event: ping\ndata: {}\n\n{}", other, lf(RESPONSE)),
                ok(),
            ),
            (
                "a server request with our id's number is not ours",
                lf(request) + &lf(RESPONSE),
                ok(),
            ),
            (
                "a response to another id is not ours",
                lf(&other.replace("\"id\":1", "\"id\":2")) + &lf(RESPONSE),
                ok(),
            ),
            (
                "what follows our response is not read",
                lf(RESPONSE) + "data: {not json\n\n",
                ok(),
            ),
            (
                "an event not ended by a blank line is not dispatched",
                format!("data: {RESPONSE}\n"),
                Err("no_response"),
            ),
            ("only notifications", lf(NOTIFICATION), Err("no_response")),
            ("empty", String::new(), Err("no_response")),
            (
                "not JSON",
                lf("{not json") + &lf(RESPONSE),
                Err("malformed"),
            ),
            (
                "a JSON array",
                lf(&format!("[{RESPONSE}]")),
                Err("malformed"),
            ),
            (
                "one message over MESSAGE_CAP",
                lf(&padded(r#""id":1,"result":{}"#, MESSAGE_CAP)),
                Err("too_large"),
            ),
            (
                "notifications over ANSWER_CAP",
                flood.repeat(ANSWER_CAP / flood.len() + 1) + &lf(RESPONSE),
                Err("too_large"),
            ),
        ];
        for (name, input, want) in cases {
            for width in widths(input.as_bytes()) {
                let read = label(from_events(chunked(input.as_bytes(), width)).await);
                assert_eq!(read, want, "{name}, in chunks of {width}");
            }
        }
        // Bytes that are not UTF-8 in a data line.
        let input = [
            b"data: {\"a\":\"\xff\"}\n\n".as_slice(),
            lf(RESPONSE).as_bytes(),
        ]
        .concat();
        for width in widths(&input) {
            let read = label(from_events(chunked(&input, width)).await);
            assert_eq!(read, Err("malformed"), "not UTF-8, in chunks of {width}");
        }
    }

    #[tokio::test]
    async fn a_stream_left_open_after_our_response_is_not_waited_for() {
        let input = [NOTIFICATION, RESPONSE].map(|d| event(d, "\r\n")).concat();
        for width in widths(input.as_bytes()) {
            let open = chunked(input.as_bytes(), width).chain(futures_util::stream::pending());
            let read = tokio::time::timeout(Duration::from_secs(5), from_events(open))
                .await
                .expect("read without waiting for the end");
            assert_eq!(label(read), ok(), "in chunks of {width}");
        }
    }

    #[tokio::test]
    async fn a_json_answer_is_one_message_our_response() {
        let over = padded(r#""id":1,"result":{}"#, MESSAGE_CAP);
        let cases: Vec<(&str, String, Result<Value, &str>)> = vec![
            ("our response", RESPONSE.into(), ok()),
            ("empty", String::new(), Err("no_response")),
            ("a notification", NOTIFICATION.into(), Err("no_response")),
            (
                "another id",
                RESPONSE.replace("\"id\":1", "\"id\":\"1\""),
                Err("no_response"),
            ),
            ("not JSON", "<html>".into(), Err("malformed")),
            ("over MESSAGE_CAP", over, Err("too_large")),
        ];
        for (name, input, want) in cases {
            for width in widths(input.as_bytes()) {
                let read = label(from_json(chunked(input.as_bytes(), width)).await);
                assert_eq!(read, want, "{name}, in chunks of {width}");
            }
        }
    }
}
