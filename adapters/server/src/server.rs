//! A running server: the feed task and what the handlers share ([`Server`]); its routes are
//! built in `routes.rs`.

use std::sync::Arc;

use turnstile_host::Host;

use crate::asks::Asks;
use crate::config::ServerConfig;
use crate::feed;

/// A running server: the feed task and what the handlers share. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) host: Host,
    pub(crate) asks: Asks,
    pub(crate) config: ServerConfig,
    pub(crate) feed: feed::Feed,
    pub(crate) streams: Arc<tokio::sync::Semaphore>,
    pub(crate) shutting_down: tokio::sync::watch::Sender<bool>,
}

impl Server {
    /// Starts the event feed over `host`. `asks` must be the [`Asker`](turnstile_tools::Asker)
    /// of the host's permission gate, so that its asks reach the clients.
    pub async fn start(host: Host, asks: Asks, config: ServerConfig) -> Server {
        let feed = feed::Feed::start(host.clone(), asks.clone(), config.feed_capacity).await;
        let streams = Arc::new(tokio::sync::Semaphore::new(config.limits.streams));
        let inner = Inner {
            host,
            asks,
            config,
            feed,
            streams,
            shutting_down: tokio::sync::watch::channel(false).0,
        };
        Server { inner: Arc::new(inner) }
    }

    /// Shuts the host down (SPEC 4.10): new prompts get `503 shutting_down`, every unfinished
    /// submission ends `interrupted` and its RunComplete reaches the streams, then the streams
    /// end. The HTTP server itself is stopped by the caller after this returns.
    ///
    /// # Errors
    /// Why the host stopped, when it stopped before or during the shutdown.
    pub async fn shutdown(&self) -> Result<(), turnstile_host::Stopped> {
        self.inner.shutting_down.send_replace(true);
        self.inner.host.shutdown().await
    }

    /// The host the server is over.
    #[must_use]
    pub fn host(&self) -> &Host {
        &self.inner.host
    }
}
