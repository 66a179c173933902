// A blocking HTTP/1.1 client on one kept-alive TCP connection, written on POSIX sockets so
// that it can also send what no library would: cut-off bodies, wrong lengths, raw bytes.
// The load generator (bench/load_test.cc), the fault test and examples/serve_client.cc use
// it. Not a general client: no TLS, no chunked responses, no redirects.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "base/result.h"

namespace kiln::serving {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  ///< names in lower case
  std::string body;
};

class HttpConnection {
 public:
  /// Connects to host:port (numeric IPv4 or a name), with `timeout` for every read and
  /// write after.
  static Result<HttpConnection> connect(const std::string& host, int port,
                                        std::chrono::milliseconds timeout = std::chrono::seconds(30));
  HttpConnection(HttpConnection&& other) noexcept;
  HttpConnection& operator=(HttpConnection&& other) noexcept;
  ~HttpConnection();

  /// Sends a request (Content-Length set from the body) and reads the response.
  Result<HttpResponse> request(std::string_view method, std::string_view path, std::string_view body = {},
                               const std::map<std::string, std::string>& headers = {});
  /// Sends bytes as they are.
  Status send_raw(std::string_view bytes);
  /// Reads one response (a body of its Content-Length, or until the connection closes).
  Result<HttpResponse> read_response();
  /// False once the server said `Connection: close` or closed it.
  bool open() const { return fd_ >= 0; }

 private:
  explicit HttpConnection(int fd) : fd_(fd) {}
  void close();
  Status read_more();
  int fd_ = -1;
  std::string buffer_;  // bytes read past the last response
};

}  // namespace kiln::serving
