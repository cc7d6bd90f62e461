// Which client a connection counts against for --max-connections-per-client: IPv4 by address,
// IPv6 by /64, IPv4-mapped IPv6 as its IPv4 address, link-local and loopback IPv6 by address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <string>

#include "server/client_key.h"

namespace lockstep {
namespace {

using server::ClientKey;

std::string KeyOf4(const char* text) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(40000);
  EXPECT_EQ(::inet_pton(AF_INET, text, &a.sin_addr), 1) << text;
  return ClientKey(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

std::string KeyOf6(const char* text, uint32_t scope = 0) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(40000);
  a.sin6_scope_id = scope;
  EXPECT_EQ(::inet_pton(AF_INET6, text, &a.sin6_addr), 1) << text;
  return ClientKey(reinterpret_cast<const sockaddr*>(&a), sizeof a);
}

TEST(ServeClientKey, Ipv4KeysByTheWholeAddress) {
  EXPECT_EQ(KeyOf4("203.0.113.7"), "203.0.113.7");
  EXPECT_EQ(KeyOf4("127.0.0.1"), "127.0.0.1");
  EXPECT_NE(KeyOf4("203.0.113.7"), KeyOf4("203.0.113.8"));  // neighbours are two clients
}

TEST(ServeClientKey, Ipv6AddressesInOneSlash64ShareAKey) {
  EXPECT_EQ(KeyOf6("2001:db8:1:2::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(KeyOf6("2001:db8:1:2:aaaa:bbbb:cccc:dddd"), "2001:db8:1:2::/64");
  EXPECT_EQ(KeyOf6("2001:db8:1:2:ffff:ffff:ffff:ffff"), "2001:db8:1:2::/64");
  EXPECT_EQ(KeyOf6("2001:db8:0:0:8000::"), "2001:db8::/64");  // bit 64 is the host's
}

TEST(ServeClientKey, DifferentSlash64sDiffer) {
  EXPECT_EQ(KeyOf6("2001:db8:1:3::1"), "2001:db8:1:3::/64");
  EXPECT_NE(KeyOf6("2001:db8:1:2::1"), KeyOf6("2001:db8:1:3::1"));  // the last network bit
  EXPECT_NE(KeyOf6("2001:db8:1:2::1"), KeyOf6("2001:db9:1:2::1"));
  EXPECT_NE(KeyOf6("fd00:1:2:3::1"), KeyOf6("fd00:1:2:4::1"));  // unique local: by /64 too
}

TEST(ServeClientKey, MappedIpv4EqualsPlainIpv4) {
  EXPECT_EQ(KeyOf6("::ffff:203.0.113.7"), "203.0.113.7");
  EXPECT_EQ(KeyOf6("::ffff:203.0.113.7"), KeyOf4("203.0.113.7"));
  EXPECT_NE(KeyOf6("::ffff:203.0.113.7"), KeyOf6("::ffff:203.0.113.8"));  // not by /64
  EXPECT_EQ(KeyOf6("::ffff:127.0.0.1"), "127.0.0.1");
}

TEST(ServeClientKey, LinkLocalKeysByTheWholeAddress) {
  EXPECT_EQ(KeyOf6("fe80::1"), "fe80::1");
  EXPECT_NE(KeyOf6("fe80::1"), KeyOf6("fe80::2"));      // one /64, two hosts
  EXPECT_EQ(KeyOf6("febf::1:2:3:4"), "febf::1:2:3:4");  // the /10's last /16
  EXPECT_EQ(KeyOf6("fec0::1"), "fec0::/64");            // outside fe80::/10
  // The same address on two interfaces (zones) is two hosts.
  EXPECT_EQ(KeyOf6("fe80::1", 2), "fe80::1%2");
  EXPECT_NE(KeyOf6("fe80::1", 2), KeyOf6("fe80::1", 3));
}

TEST(ServeClientKey, LoopbackIpv6IsOneClientApartFromIpv4) {
  EXPECT_EQ(KeyOf6("::1"), "::1");
  EXPECT_NE(KeyOf6("::1"), KeyOf6("::2"));  // not folded into ::/64 with its neighbours
  EXPECT_NE(KeyOf6("::1"), KeyOf4("127.0.0.1"));
}

TEST(ServeClientKey, OtherFamiliesAndShortAddressesHaveNoKey) {
  sockaddr_un unix_peer{};
  unix_peer.sun_family = AF_UNIX;
  EXPECT_EQ(ClientKey(reinterpret_cast<const sockaddr*>(&unix_peer), sizeof unix_peer), "");
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  EXPECT_EQ(ClientKey(reinterpret_cast<const sockaddr*>(&a), sizeof(sockaddr_in)), "");  // cut
  EXPECT_EQ(ClientKey(nullptr, 0), "");
  EXPECT_EQ(server::PeerClientKey(-1), "");  // no socket: no peer
}

}  // namespace
}  // namespace lockstep
