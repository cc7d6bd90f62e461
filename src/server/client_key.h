// Which client a connection counts against for --max-connections-per-client: its IPv4 address,
// or the /64 network of its IPv6 address.
#pragma once

#include <sys/socket.h>

#include <string>

namespace lockstep::server {

// The key of the peer at `addr` (`len` bytes): what one client is, for counting its connections.
// - IPv4: the address ("203.0.113.7").
// - IPv6: its /64 ("2001:db8:1:2::/64"). An IPv6 host is handed a whole /64 (SLAAC, privacy
//   addresses) and can draw any number of addresses from it, so counting each address apart
//   would let one client open the limit's worth of connections per address it makes up.
// - IPv4-mapped IPv6 (::ffff:a.b.c.d, an IPv4 client of a dual-stack listener): the IPv4
//   address, so a client counts the same whichever socket family took it.
// - Link-local (fe80::/10) and loopback (::1): the whole address, with its zone ("fe80::1%2"):
//   every host on a link shares fe80::/64, and ::1 is one host whose /64 would also hold the
//   mapped addresses.
// Empty for any other family (or a `len` too short for its family), so such peers share one key.
std::string ClientKey(const sockaddr* addr, socklen_t len);

// ClientKey of the connected socket's peer; empty if it has none (the client already reset the
// connection).
std::string PeerClientKey(int socket);

}  // namespace lockstep::server
