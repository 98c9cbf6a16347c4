"""The load of bench/rekey_soak.sh: CHANNELS connections at once through a SOCKS5 proxy (by
name, as socks5h), half downloading and half uploading BYTES each from rekey_target.py, every
byte checked against the pattern. Prints one JSON object: bytes moved, seconds, and each
channel's failure if any.

    python3 rekey_load.py --proxy HOST:PORT --target NAME:PORT --channels 12 --bytes N
"""

import argparse
import json
import socket
import struct
import sys
import threading
import time

PERIOD = 251
CHUNK = 256 * 1024
BLOCK = bytes(i % PERIOD for i in range(CHUNK + PERIOD))


def socks5(proxy, name, port):
    """A connection to NAME:PORT through the SOCKS5 proxy, the name resolved by the proxy."""
    host, proxy_port = proxy.rsplit(":", 1)
    s = socket.create_connection((host, int(proxy_port)), timeout=120)
    s.sendall(b"\x05\x01\x00")
    if s.recv(2) != b"\x05\x00":
        raise ConnectionError("the proxy wants authentication")
    encoded = name.encode()
    s.sendall(b"\x05\x01\x00\x03" + bytes([len(encoded)]) + encoded + struct.pack(">H", port))
    reply = s.recv(4)
    if len(reply) < 4 or reply[1] != 0:
        raise ConnectionError(f"SOCKS reply {reply[1] if len(reply) > 1 else '?'}")
    # The bound address: an IPv4 one or a domain name, then the port.
    rest = {1: 4, 4: 16}.get(reply[3])
    if rest is None:
        rest = s.recv(1)[0]
    s.recv(rest + 2)
    return s


def download(proxy, name, port, n):
    s = socks5(proxy, name, port)
    with s:
        s.sendall(f"DOWN {n}\n".encode())
        view = memoryview(bytearray(CHUNK))
        got = 0
        while got < n:
            length = s.recv_into(view, min(CHUNK, n - got))
            if not length:
                raise ConnectionError(f"download ended after {got} of {n} bytes")
            offset = got % PERIOD
            if view[:length] != BLOCK[offset : offset + length]:
                raise ValueError(f"download differs near byte {got}")
            got += length
    return n


def upload(proxy, name, port, n):
    s = socks5(proxy, name, port)
    with s:
        s.sendall(f"UP {n}\n".encode())
        sent = 0
        while sent < n:
            length = min(CHUNK, n - sent)
            offset = sent % PERIOD
            s.sendall(BLOCK[offset : offset + length])
            sent += length
        answer = s.makefile("rb").readline().decode(errors="replace").strip()
        if answer != f"OK {n}":
            raise ValueError(f"upload answered {answer!r}")
    return n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--proxy", required=True)
    p.add_argument("--target", required=True, help="NAME:PORT, resolved by the proxy's last hop")
    p.add_argument("--channels", type=int, default=12)
    p.add_argument("--bytes", type=int, required=True, help="per channel")
    args = p.parse_args()
    name, port = args.target.rsplit(":", 1)
    results = [None] * args.channels

    def run(i):
        work = download if i % 2 == 0 else upload
        try:
            results[i] = {"way": work.__name__, "bytes": work(args.proxy, name, int(port), args.bytes)}
        except Exception as e:  # every failure is reported, none stops the others
            results[i] = {"way": work.__name__, "error": f"{type(e).__name__}: {e}"}

    started = time.monotonic()
    threads = [threading.Thread(target=run, args=(i,)) for i in range(args.channels)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - started
    moved = sum(r.get("bytes", 0) for r in results)
    failures = [f"channel {i} ({r['way']}): {r['error']}" for i, r in enumerate(results) if "error" in r]
    json.dump({"bytes": moved, "seconds": seconds, "failures": failures}, sys.stdout)
    print()


if __name__ == "__main__":
    sys.exit(main())
