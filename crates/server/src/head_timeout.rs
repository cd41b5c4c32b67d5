//! A time limit on request heads: a connection whose request line and
//! headers have not all arrived within the limit is closed, however slowly
//! its bytes trickle in (a slow-headers client would otherwise hold a
//! connection for ever). The clock starts when the connection opens, and
//! for each later request on a kept-alive connection at its first byte; a
//! body is bounded by the request timeout instead. (An idle kept-alive
//! connection, between a response and the next request, is not timed.)

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{sleep, Sleep};

/// The end of a request head.
const HEAD_END: &[u8; 4] = b"\r\n\r\n";

/// A TCP listener whose connections close when a request head takes
/// longer than `limit`.
#[derive(Debug)]
pub(crate) struct HeadTimeoutListener {
    inner: TcpListener,
    limit: Duration,
}

impl HeadTimeoutListener {
    /// `inner`'s connections, each request head within `limit`.
    pub(crate) fn new(inner: TcpListener, limit: Duration) -> HeadTimeoutListener {
        HeadTimeoutListener { inner, limit }
    }
}

impl Listener for HeadTimeoutListener {
    type Io = HeadTimeout<TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, address) = Listener::accept(&mut self.inner).await;
        (HeadTimeout::new(stream, self.limit), address)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection whose request heads must each arrive within a limit.
#[derive(Debug)]
pub(crate) struct HeadTimeout<Io> {
    inner: Io,
    limit: Duration,
    /// When the head being read must be complete; `None` while a body is
    /// read, a response written, or the next request awaited.
    deadline: Option<Pin<Box<Sleep>>>,
    /// A response went out: the next byte read starts a new head.
    awaiting_head: bool,
    /// How many bytes of [`HEAD_END`] the bytes read so far end with.
    matched: usize,
}

impl<Io> HeadTimeout<Io> {
    fn new(inner: Io, limit: Duration) -> HeadTimeout<Io> {
        HeadTimeout { inner, limit, deadline: Some(Box::pin(sleep(limit))), awaiting_head: false, matched: 0 }
    }

    /// Looks for the end of the head in `bytes`: once found, no deadline.
    fn scan(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.matched =
                if byte == HEAD_END[self.matched] { self.matched + 1 } else { usize::from(byte == HEAD_END[0]) };
            if self.matched == HEAD_END.len() {
                self.deadline = None;
                self.matched = 0;
                return;
            }
        }
    }
}

impl<Io: AsyncRead + Unpin> AsyncRead for HeadTimeout<Io> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                if this.awaiting_head && !read.is_empty() {
                    this.awaiting_head = false;
                    this.matched = 0;
                    this.deadline = Some(Box::pin(sleep(this.limit)));
                }
                if this.deadline.is_some() {
                    this.scan(read);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                let expired = this.deadline.as_mut().is_some_and(|deadline| deadline.as_mut().poll(cx).is_ready());
                if expired {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the request head did not arrive within its time limit",
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for HeadTimeout<Io> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(written, Poll::Ready(Ok(_))) {
            // A response goes out: the next head's clock starts at its
            // first byte.
            this.deadline = None;
            this.awaiting_head = true;
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_a_head_is_found_across_reads() {
        let mut connection =
            HeadTimeout { inner: (), limit: Duration::ZERO, deadline: None, awaiting_head: false, matched: 0 };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        runtime.block_on(async {
            connection.deadline = Some(Box::pin(sleep(Duration::from_secs(1))));
            connection.scan(b"GET / HTTP/1.1\r\nhost: x\r");
            assert!(connection.deadline.is_some());
            connection.scan(b"\n\r");
            assert!(connection.deadline.is_some());
            connection.scan(b"\n{\"body\": 1}");
            assert!(connection.deadline.is_none(), "the head ended");
            connection.deadline = Some(Box::pin(sleep(Duration::from_secs(1))));
            connection.scan(b"\r\n\r\r\n");
            assert!(connection.deadline.is_some(), "no empty line yet");
            connection.scan(b"\r\n");
            assert!(connection.deadline.is_none());
        });
    }
}
