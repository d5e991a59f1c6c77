//! One error type for every failure a client can see, answered with OpenAI's shape
//! `{"error": {"code", "message", "type"}}` and llama.cpp's type names and status codes.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// What went wrong with a request, with the HTTP status it maps to.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Malformed JSON, wrong types, out-of-range values (400 `invalid_request_error`).
    #[error("{0}")]
    InvalidRequest(String),
    /// The prompt does not fit the slot's context (400 `exceed_context_size_error`).
    #[error("request ({n_prompt_tokens} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it")]
    ExceedContext {
        /// Tokens of the prompt (and of the reserved answer).
        n_prompt_tokens: usize,
        /// The slot's context size.
        n_ctx: usize,
    },
    /// A request body over `--max-body` (413 `invalid_request_error`).
    #[error("{0}")]
    TooLarge(String),
    /// Missing or wrong API key (401 `authentication_error`).
    #[error("Invalid API Key")]
    Authentication,
    /// Unknown route, slot or model (404 `not_found_error`).
    #[error("{0}")]
    NotFound(String),
    /// A route called with a method it does not take, such as a GET on a
    /// completion endpoint (405 `invalid_request_error`).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// An endpoint that was not enabled (501 `not_supported_error`).
    #[error("{0}")]
    NotSupported(String),
    /// Queue full or shutting down (503 `unavailable_error`).
    #[error("{0}")]
    Unavailable(String),
    /// A failure inside the server, such as a decode error (500 `server_error`).
    #[error("{0}")]
    Server(String),
}

impl ApiError {
    /// The HTTP status code.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) | ApiError::ExceedContext { .. } => StatusCode::BAD_REQUEST,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Authentication => StatusCode::UNAUTHORIZED,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::NotSupported(_) => StatusCode::NOT_IMPLEMENTED,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Server(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// llama.cpp's name for the error's kind.
    pub fn type_name(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) | ApiError::TooLarge(_) | ApiError::MethodNotAllowed(_) => {
                "invalid_request_error"
            }
            ApiError::ExceedContext { .. } => "exceed_context_size_error",
            ApiError::Authentication => "authentication_error",
            ApiError::NotFound(_) => "not_found_error",
            ApiError::NotSupported(_) => "not_supported_error",
            ApiError::Unavailable(_) => "unavailable_error",
            ApiError::Server(_) => "server_error",
        }
    }

    /// The `{"code", "message", "type"}` object (plus the token counts for a context
    /// overflow, as llama.cpp adds them).
    pub fn to_json(&self) -> serde_json::Value {
        let mut e = serde_json::json!({
            "code": self.status().as_u16(),
            "message": self.to_string(),
            "type": self.type_name(),
        });
        if let ApiError::ExceedContext {
            n_prompt_tokens,
            n_ctx,
        } = self
        {
            e["n_prompt_tokens"] = (*n_prompt_tokens).into();
            e["n_ctx"] = (*n_ctx).into();
        }
        e
    }

    /// The whole body: `{"error": {...}}`.
    pub fn body(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.to_json() })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status(), axum::Json(self.body())).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_codes() {
        let e = ApiError::ExceedContext {
            n_prompt_tokens: 300,
            n_ctx: 256,
        };
        let j = e.body();
        assert_eq!(j["error"]["code"], 400);
        assert_eq!(j["error"]["type"], "exceed_context_size_error");
        assert_eq!(j["error"]["n_ctx"], 256);
        assert_eq!(ApiError::Authentication.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            ApiError::Unavailable("x".into()).type_name(),
            "unavailable_error"
        );
    }
}
