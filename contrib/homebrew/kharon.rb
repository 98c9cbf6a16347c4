# Homebrew formula: builds kharon from the repository's release tag (contrib/README.md, "Homebrew").
# The tag below is the one contrib/release.sh creates and writes here: v + the workspace version.
class Kharon < Formula
  desc "Local SOCKS5 proxy that routes cluster hosts through their SSH jump hosts"
  homepage "https://github.com/vshn/kharon-rs"
  # A git checkout, not a tarball: --version then names the commit.
  url "https://github.com/vshn/kharon-rs.git", tag: "v0.1.0"
  license "BSD-3-Clause"
  head "https://github.com/vshn/kharon-rs.git", branch: "main"

  depends_on "rust" => :build

  def install
    system "cargo", "build", "--release", "--locked"
    bin.install "target/release/kharond", "target/release/kharonctl"
    # man1 is share/man/man1, linked into $(brew --prefix)/share/man/man1, where man finds it
    # through PATH; both commands create the folder.
    system bin/"kharonctl", "man-pages", "--output", man1
    system bin/"kharond", "--man-pages", man1
    # Loaders, not generated scripts: a generated one would name this Cellar path (see
    # contrib/completions/README.md). They land in etc/bash_completion.d (bash-completion@2 reads
    # it), share/zsh/site-functions (on zsh's $fpath) and share/fish/vendor_completions.d.
    bash_completion.install "contrib/completions/kharonctl.bash" => "kharonctl"
    zsh_completion.install "contrib/completions/_kharonctl"
    fish_completion.install "contrib/completions/kharonctl.fish"
  end

  def caveats
    <<~EOS
      Run kharond at login as a launchd agent (it picks the right SSH_AUTH_SOCK):
        kharonctl service-install --kharond #{opt_bin}/kharond
      Then fetch the cluster inventory:
        kharonctl login && kharonctl update
    EOS
  end

  test do
    assert_match version.to_s, shell_output("#{bin}/kharonctl --version")
    assert_match version.to_s, shell_output("#{bin}/kharond --version")
    assert_match "kharonctl-status", (man1/"kharonctl-status.1").read
    assert_path_exists man1/"kharond.1"
    assert_match "kharonctl completions bash", (bash_completion/"kharonctl").read
    assert_path_exists zsh_completion/"_kharonctl"
    assert_path_exists fish_completion/"kharonctl.fish"
    (testpath/"man").mkpath
    system bin/"kharond", "--man-pages", testpath/"man"
    assert_path_exists testpath/"man/kharond.1"
  end
end
