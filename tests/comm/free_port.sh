# Sourced by the launcher tests: free_port prints a TCP port for a job's rendezvous that nothing
# listens on now, below the kernel's range of ephemeral ports (32768 and up), so that no server a
# concurrent test started on port 0, and no outgoing connection, already holds it. Tests running
# at once pick different ones (each tries ports from its own pid on).
free_port() {
  python3 - "$$" <<'PY'
import socket, sys
start = int(sys.argv[1])
for i in range(12000):
    port = 20000 + (start + 7919 * i) % 12000
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    sys.exit(0)
sys.exit("no free port in [20000, 32000)")
PY
}
