// Client keys for the per-client connection limit: IPv4 addresses and IPv6 /64 networks.
#include "server/client_key.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace lockstep::server {
namespace {

std::string Text(int family, const void* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (::inet_ntop(family, address, text, sizeof text) == nullptr) return "";
  return text;
}

bool IsLinkLocal(const in6_addr& a) {  // fe80::/10
  return a.s6_addr[0] == 0xfe && (a.s6_addr[1] & 0xc0) == 0x80;
}

std::string Ipv6Key(const sockaddr_in6& peer) {
  const in6_addr& a = peer.sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a)) return Text(AF_INET, &a.s6_addr[12]);
  if (IN6_IS_ADDR_LOOPBACK(&a)) return Text(AF_INET6, &a);
  if (IsLinkLocal(a)) {
    // The same link-local address on two interfaces is two hosts: the zone tells them apart.
    const std::string text = Text(AF_INET6, &a);
    return peer.sin6_scope_id == 0 ? text : fmt::format("{}%{}", text, peer.sin6_scope_id);
  }
  in6_addr network = a;
  std::fill(network.s6_addr + 8, network.s6_addr + 16, uint8_t{0});
  return Text(AF_INET6, &network) + "/64";
}

}  // namespace

std::string ClientKey(const sockaddr* addr, socklen_t len) {
  if (addr == nullptr || len < static_cast<socklen_t>(sizeof(sa_family_t))) return "";
  if (addr->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in)))
    return Text(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr);
  if (addr->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6)))
    return Ipv6Key(*reinterpret_cast<const sockaddr_in6*>(addr));
  return "";
}

std::string PeerClientKey(int socket) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(socket, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  return ClientKey(reinterpret_cast<const sockaddr*>(&addr), len);
}

}  // namespace lockstep::server
