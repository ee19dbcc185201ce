//! The Bot API's wire shapes as the fake speaks them: JSON answers,
//! `429 retry_after`, a connection cut mid-body, and request parameters
//! read from the query string, a JSON body or a form, as Telegram accepts.

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

fn json_response(status: StatusCode, value: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

pub(super) fn ok(result: Value) -> Response {
    json_response(StatusCode::OK, &json!({"ok": true, "result": result}))
}

pub(super) fn fail(code: u16, description: &str) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    json_response(
        status,
        &json!({"ok": false, "error_code": code, "description": description}),
    )
}

pub(super) fn rate_limited(retry_after: u64) -> Response {
    json_response(
        StatusCode::TOO_MANY_REQUESTS,
        &json!({
            "ok": false,
            "error_code": 429,
            "description": format!("Too Many Requests: retry after {retry_after}"),
            "parameters": {"retry_after": retry_after},
        }),
    )
}

pub(super) fn dropped_connection() -> Response {
    let failing = futures_util::stream::iter([Err::<Bytes, std::io::Error>(std::io::Error::new(
        std::io::ErrorKind::ConnectionReset,
        "fake: dropped",
    ))]);
    let mut response = Response::new(Body::from_stream(failing));
    // Claim a body that never comes, so the client cannot mistake the cut
    // for a complete (empty) answer.
    response.headers_mut().insert(
        header::CONTENT_LENGTH,
        header::HeaderValue::from_static("64"),
    );
    response
}

/// Query string and body parameters, as Telegram accepts them.
pub(super) fn parse_params(uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Value {
    let mut params = Map::new();
    if let Some(query) = uri.query()
        && let Ok(pairs) = serde_urlencoded::from_str::<Vec<(String, String)>>(query)
    {
        for (k, v) in pairs {
            params.insert(k, form_value(v));
        }
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if content_type.starts_with("application/json") {
        if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) {
            params.extend(map);
        }
    } else if !body.is_empty()
        && let Ok(pairs) = serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
    {
        for (k, v) in pairs {
            params.insert(k, form_value(v));
        }
    }
    Value::Object(params)
}

/// Form values that hold JSON (numbers, objects, arrays) are JSON-decoded,
/// as the Bot API does.
pub(super) fn form_value(v: String) -> Value {
    match serde_json::from_str::<Value>(&v) {
        Ok(parsed @ (Value::Number(_) | Value::Object(_) | Value::Array(_) | Value::Bool(_))) => {
            parsed
        }
        _ => Value::String(v),
    }
}

pub(super) fn int(params: &Value, key: &str) -> Option<i64> {
    match params.get(key)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

pub(super) fn flag(params: &Value, key: &str) -> bool {
    match params.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}
