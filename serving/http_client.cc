#include "serving/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>

namespace kiln::serving {

namespace {

std::string lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return std::string(text);
}

}  // namespace

Result<HttpConnection> HttpConnection::connect(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int e = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); e != 0)
    return make_error("http: cannot resolve " + host + ": " + gai_strerror(e));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    freeaddrinfo(found);
    return make_error(std::string("http: socket: ") + std::strerror(errno));
  }
  HttpConnection connection(fd);
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int connected = ::connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (connected != 0)
    return make_error("http: cannot connect to " + host + ":" + service + ": " + std::strerror(errno));
  return connection;
}

HttpConnection::HttpConnection(HttpConnection&& other) noexcept : fd_(other.fd_), buffer_(std::move(other.buffer_)) {
  other.fd_ = -1;
}

HttpConnection& HttpConnection::operator=(HttpConnection&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    buffer_ = std::move(other.buffer_);
    other.fd_ = -1;
  }
  return *this;
}

HttpConnection::~HttpConnection() { close(); }

void HttpConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status HttpConnection::send_raw(std::string_view bytes) {
  if (fd_ < 0) return make_error("http: the connection is closed");
  while (!bytes.empty()) {
    const ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) {
      const std::string why = std::strerror(errno);
      close();
      return make_error("http: send failed: " + why);
    }
    bytes.remove_prefix(static_cast<size_t>(sent));
  }
  return Status::Ok();
}

Status HttpConnection::read_more() {
  if (fd_ < 0) return make_error("http: the connection is closed");
  char chunk[65536];
  for (;;) {
    const ssize_t got = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got > 0) {
      buffer_.append(chunk, static_cast<size_t>(got));
      return Status::Ok();
    }
    const std::string why = got == 0 ? "the server closed the connection" : std::strerror(errno);
    close();
    return make_error("http: " + why);
  }
}

Result<HttpResponse> HttpConnection::read_response() {
  size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) KILN_RETURN_IF_ERROR(read_more());
  HttpResponse response;
  std::string_view head(buffer_.data(), end);
  const size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12)
    return make_error("http: malformed status line '" + std::string(status_line) + "'");
  response.status = std::atoi(std::string(status_line.substr(9, 3)).c_str());
  for (size_t at = line_end; at != std::string_view::npos && at < head.size();) {
    const size_t next = head.find("\r\n", at + 2);
    std::string_view line =
        head.substr(at + 2, next == std::string_view::npos ? std::string_view::npos : next - at - 2);
    if (const size_t colon = line.find(':'); colon != std::string_view::npos)
      response.headers[lower(std::string(line.substr(0, colon)))] = trim(line.substr(colon + 1));
    at = next;
  }
  buffer_.erase(0, end + 4);
  auto length = response.headers.find("content-length");
  if (length != response.headers.end()) {
    size_t bytes = 0;
    const std::string& text = length->second;
    if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), bytes);
        ec != std::errc() || end != text.data() + text.size())
      return make_error("http: malformed Content-Length '" + text + "'");
    while (buffer_.size() < bytes) KILN_RETURN_IF_ERROR(read_more());
    response.body = buffer_.substr(0, bytes);
    buffer_.erase(0, bytes);
  } else {
    while (read_more().ok()) {
    }
    response.body = std::move(buffer_);
    buffer_.clear();
  }
  if (auto c = response.headers.find("connection"); c != response.headers.end() && lower(c->second) == "close") close();
  return response;
}

Result<HttpResponse> HttpConnection::request(std::string_view method, std::string_view path, std::string_view body,
                                             const std::map<std::string, std::string>& headers) {
  std::string message = std::string(method) + " " + std::string(path) + " HTTP/1.1\r\nHost: kiln\r\n";
  for (const auto& [name, value] : headers) message += name + ": " + value + "\r\n";
  if (!body.empty() || method == "POST") message += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  message += "\r\n";
  message += body;
  KILN_RETURN_IF_ERROR(send_raw(message));
  return read_response();
}

}  // namespace kiln::serving
