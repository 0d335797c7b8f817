"""Exit 0 when HAProxy's runtime API on this host shows SERVER of backend vllm in operational STATE.

Run on the front door: docker exec -i <door> python3 - SERVER STATE < haproxy_server_state.py
STATE is srv_op_state of 'show servers state': 0 stopped (its health check failed), 2 running.
"""

import socket
import sys

server, wanted = sys.argv[1], sys.argv[2]
sock = socket.socket(socket.AF_UNIX)
sock.connect("/run/haproxy/admin.sock")
sock.sendall(b"show servers state vllm\n")
rows = [line.split() for line in sock.makefile().read().splitlines() if line.strip() and not line.startswith("#")][1:]
# be_id be_name srv_id srv_name srv_addr srv_op_state ...
sys.exit(0 if any(row[3] == server and row[5] == wanted for row in rows) else 1)
