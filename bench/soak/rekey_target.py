"""The target of bench/rekey_soak.sh: per connection, one line naming a transfer, then the transfer.

    DOWN N\\n   the server sends N bytes of the pattern, then closes
    UP N\\n     the client sends N bytes; the server checks them against the pattern and answers
               "OK N\\n", or "BAD AT offset\\n" at the first byte that differs or is missing

The pattern is byte i = i mod 251 (a period that is not a power of two, so an offset error
shows). Prints the port it listens on (127.0.0.1) as its first line, then serves until killed.
"""

import socket
import sys
import threading

PERIOD = 251
CHUNK = 256 * 1024
# One chunk plus a period: every window of the pattern is a slice of it.
BLOCK = bytes(i % PERIOD for i in range(CHUNK + PERIOD))


def down(conn, n):
    sent = 0
    while sent < n:
        length = min(CHUNK, n - sent)
        offset = sent % PERIOD
        conn.sendall(BLOCK[offset : offset + length])
        sent += length


def up(conn, reader, n):
    got = 0
    view = memoryview(bytearray(CHUNK))
    while got < n:
        length = reader.readinto(view[: min(CHUNK, n - got)])
        if not length:
            conn.sendall(f"BAD AT {got}\n".encode())
            return
        offset = got % PERIOD
        if view[:length] != BLOCK[offset : offset + length]:
            conn.sendall(f"BAD AT {got}\n".encode())
            return
        got += length
    conn.sendall(f"OK {n}\n".encode())


def serve(conn):
    with conn:
        reader = conn.makefile("rb")
        line = reader.readline().decode(errors="replace").split()
        if len(line) != 2 or not line[1].isdigit():
            return
        kind, n = line[0], int(line[1])
        try:
            if kind == "DOWN":
                down(conn, n)
            elif kind == "UP":
                up(conn, reader, n)
        except OSError:
            return


def main():
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
