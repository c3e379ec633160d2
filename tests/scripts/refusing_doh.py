#!/usr/bin/env python3
"""A DNS-over-HTTPS server (HTTP/2, with the h2 package) that refuses every
request with RST_STREAM REFUSED_STREAM: "not processed, send it again".
A client that always does would go round forever.

    refusing_doh.py CERT KEY COUNT_FILE [zero-streams]

With zero-streams it also sets SETTINGS_MAX_CONCURRENT_STREAMS to 0 (the
client's first requests, written with its preface, come before it knows).
Prints its port, then writes the number of requests received so far to
COUNT_FILE after each one.
"""

import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings

cert, key, count_file = sys.argv[1:4]
zero_streams = sys.argv[4:5] == ["zero-streams"]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(8)
print(listener.getsockname()[1], flush=True)
count = 0
lock = threading.Lock()


def serve(sock):
    global count
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    if zero_streams:
        conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 0})
    sock.sendall(conn.data_to_send())
    while True:
        data = sock.recv(65536)
        if not data:
            return
        try:
            events = conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            return
        for ev in events:
            if isinstance(ev, h2.events.RequestReceived):
                with lock:
                    count += 1
                    with open(count_file, "w") as f:
                        f.write(str(count))
                conn.reset_stream(ev.stream_id, error_code=h2.errors.ErrorCodes.REFUSED_STREAM)
        pending = conn.data_to_send()
        if pending:
            sock.sendall(pending)


while True:
    raw, _ = listener.accept()
    try:
        tls = ctx.wrap_socket(raw, server_side=True)
    except (ssl.SSLError, OSError):
        continue
    threading.Thread(target=serve, args=(tls,), daemon=True).start()
