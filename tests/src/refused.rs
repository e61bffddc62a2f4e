//! A loopback port that refuses connections for as long as it is held.

use std::net::{Ipv4Addr, SocketAddr};

use socket2::{Domain, Socket, Type};

/// A TCP port on 127.0.0.1 that is bound and never listened on: while this lives, a connection to
/// it is refused and no other socket can take the port.
///
/// A port bound and closed again is not that: the kernel hands it to the next `bind` to port 0,
/// often another test's fake server, which then answers what was meant to fail.
pub struct RefusedPort {
    _socket: Socket,
    port: u16,
}

impl RefusedPort {
    pub fn new() -> RefusedPort {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).expect("a TCP socket");
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        socket.bind(&loopback.into()).expect("bind loopback");
        let port = socket
            .local_addr()
            .expect("the bound address")
            .as_socket()
            .expect("an IP address")
            .port();
        RefusedPort {
            _socket: socket,
            port,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Default for RefusedPort {
    fn default() -> RefusedPort {
        RefusedPort::new()
    }
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;
    use std::net::{TcpListener, TcpStream};

    use super::RefusedPort;

    #[test]
    fn a_held_port_refuses_connections_and_is_not_handed_out_again() {
        let refused = RefusedPort::new();
        for _ in 0..2 {
            let error = TcpStream::connect(("127.0.0.1", refused.port())).unwrap_err();
            assert_eq!(error.kind(), ErrorKind::ConnectionRefused, "{error}");
        }
        // Many ports asked of the kernel while it is held: none is the held one.
        let taken: Vec<TcpListener> = (0..200)
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        for listener in &taken {
            assert_ne!(listener.local_addr().unwrap().port(), refused.port());
        }
        assert!(TcpListener::bind(("127.0.0.1", refused.port())).is_err());
    }
}
