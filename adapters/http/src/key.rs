//! API keys: read from the environment or a command when a request needs one, kept only in
//! memory, and never printed: [`ApiKey`]'s `Debug` shows nothing of it and it has no
//! `Display`, so no log line, trace, store row or recording can carry it by accident.

use std::time::Duration;

use crate::config::KeySource;

/// How long a key command may take.
pub const KEY_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// A secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key from its text.
    #[must_use]
    pub fn new(secret: impl Into<String>) -> ApiKey {
        ApiKey(secret.into())
    }

    /// The secret, for the one place that sends it: the request's auth header.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Reads the key of `source` now: `None` for a provider without one.
///
/// # Errors
/// The variable is not set or empty; the command cannot start, fails, times out or prints
/// nothing. The message says which, and never contains the command's output.
pub async fn read(source: &KeySource, provider: &str) -> Result<Option<ApiKey>, String> {
    match source {
        KeySource::None => Ok(None),
        KeySource::Env(var) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(Some(ApiKey(v.trim().to_owned()))),
            _ => Err(format!(
                "no API key for provider `{provider}`: set the environment variable {var}"
            )),
        },
        KeySource::Command(argv) => {
            let program = &argv[0];
            let mut command = tokio::process::Command::new(program);
            command.args(&argv[1..]).kill_on_drop(true).stdin(std::process::Stdio::null());
            let output = tokio::time::timeout(KEY_COMMAND_TIMEOUT, command.output())
                .await
                .map_err(|_| {
                    format!(
                        "the key command `{program}` of provider `{provider}` timed out after {} s",
                        KEY_COMMAND_TIMEOUT.as_secs()
                    )
                })?
                .map_err(|e| {
                    format!("cannot run the key command `{program}` of provider `{provider}`: {e}")
                })?;
            if !output.status.success() {
                return Err(format!(
                    "the key command `{program}` of provider `{provider}` failed ({})",
                    output.status
                ));
            }
            let text = String::from_utf8_lossy(&output.stdout);
            match text.lines().next().map(str::trim).filter(|l| !l.is_empty()) {
                Some(key) => Ok(Some(ApiKey(key.to_owned()))),
                None => Err(format!(
                    "the key command `{program}` of provider `{provider}` printed no key"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_nothing_of_the_key() {
        assert_eq!(format!("{:?}", ApiKey::new("sk-secret")), "ApiKey(<redacted>)");
    }

    #[tokio::test]
    async fn keys_from_a_command_and_its_failures() {
        let echo =
            KeySource::Command(vec!["sh".into(), "-c".into(), "echo ' k1 '; echo k2".into()]);
        assert_eq!(read(&echo, "p").await.unwrap(), Some(ApiKey::new("k1")));
        let fails =
            KeySource::Command(vec!["sh".into(), "-c".into(), "echo secret; exit 3".into()]);
        let e = read(&fails, "p").await.unwrap_err();
        assert!(e.contains("failed (exit status: 3)") && !e.contains("secret"), "{e}");
        let missing = KeySource::Env("TURNSTILE_TEST_SURELY_UNSET_VARIABLE".into());
        assert_eq!(
            read(&missing, "p").await.unwrap_err(),
            "no API key for provider `p`: set the environment variable TURNSTILE_TEST_SURELY_UNSET_VARIABLE"
        );
        assert_eq!(read(&KeySource::None, "p").await.unwrap(), None);
    }
}
