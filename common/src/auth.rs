//! The shared-token check for both gRPC services: `authorization: Bearer <token>`,
//! compared in constant time so the comparison leaks nothing about the token.

/// Metadata key carrying the token.
pub const AUTH_HEADER: &str = "authorization";

/// The header value a client sends for `token`.
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Whether `header` (the raw `authorization` value) carries `expected`.
/// Constant time in the token's contents (the length may leak, as with any such check).
pub fn check_bearer(header: Option<&str>, expected: &str) -> bool {
    let Some(value) = header else { return false };
    let Some(given) = value.strip_prefix("Bearer ") else {
        return false;
    };
    constant_time_eq(given.trim().as_bytes(), expected.as_bytes())
}

/// Whether `given` is `expected`, in constant time in the token's contents.
pub fn check_token(given: &str, expected: &str) -> bool {
    constant_time_eq(given.as_bytes(), expected.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_exact_token() {
        assert!(check_bearer(Some("Bearer s3cret"), "s3cret"));
        assert!(!check_bearer(Some("Bearer s3cre"), "s3cret"));
        assert!(!check_bearer(Some("Bearer s3creT"), "s3cret"));
        assert!(!check_bearer(Some("s3cret"), "s3cret"));
        assert!(!check_bearer(None, "s3cret"));
        assert!(!check_bearer(Some("Bearer "), "s3cret"));
    }
}
