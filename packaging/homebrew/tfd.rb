# Homebrew formula for tfd. Build from source (Go, no cgo); `brew services start tfd` runs it
# with the service block below, the same settings `sudo tfd install` writes as a LaunchDaemon
# (packaging/launchd/dev.tfd.tfd.plist). Use one or the other, not both: both bind 127.0.0.1:8417.
class Tfd < Formula
  desc "Serve local language models over an OpenAI-compatible API"
  homepage "https://github.com/tfd-dev/tfd"
  url "https://github.com/tfd-dev/tfd/archive/refs/tags/v0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  license "Apache-2.0"
  head "https://github.com/tfd-dev/tfd.git", branch: "main"

  depends_on "go" => :build

  def install
    ENV["CGO_ENABLED"] = "0"
    system "go", "build", *std_go_args(ldflags: "-s -w"), "./cmd/tfd"
    (etc/"tfd").mkpath
    etc.install "configs/tfd.toml" => "tfd/tfd.toml" unless (etc/"tfd/tfd.toml").exist?
    (var/"tfd").mkpath
    (var/"log").mkpath
  end

  def caveats
    <<~EOS
      The config is #{etc}/tfd/tfd.toml; tfd applies edits while it runs.
      Start it at boot as a LaunchDaemon:   sudo tfd install
      or for your user with Homebrew:       brew services start tfd
      The API: http://127.0.0.1:8417/v1
      The log: #{var}/log/tfd.log under brew services, #{var}/log/tfd/tfd.log as a
      LaunchDaemon (tfd logs follows it; the LaunchDaemon runs as the _tfd user it makes)
    EOS
  end

  service do
    run [opt_bin/"tfd", "serve", "--config", etc/"tfd/tfd.toml"]
    keep_alive true
    process_type :interactive
    working_dir var/"tfd"
    log_path var/"log/tfd.log"
    error_log_path var/"log/tfd.log"
  end

  test do
    assert_match "tfd", shell_output("#{bin}/tfd version")
    assert_match "memory plan", shell_output("#{bin}/tfd plan --config #{etc}/tfd/tfd.toml")
  end
end
