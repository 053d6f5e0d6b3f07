#!/usr/bin/env python3
# Cold-start init time of a Lambda binary: from process spawn to its first request for work
# (GET /runtime/invocation/next) against a stub Runtime API. Usage:
#   cargo build --release -p countersign-resume && python3 scripts/measure_init.py target/release/countersign-resume
import http.server, socketserver, subprocess, time, os, sys, threading
first = {}
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if 'next' in self.path and 't' not in first:
            first['t'] = time.monotonic()
        time.sleep(0.5)
        self.send_response(500); self.end_headers()
    def log_message(self,*a): pass
srv = socketserver.ThreadingTCPServer(('127.0.0.1', 0), H); port = srv.server_address[1]
threading.Thread(target=srv.serve_forever, daemon=True).start()
cfg = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'config', 'local.toml')).read()
env = dict(os.environ, AWS_LAMBDA_RUNTIME_API=f'127.0.0.1:{port}', AWS_LAMBDA_FUNCTION_NAME='x', AWS_LAMBDA_FUNCTION_MEMORY_SIZE='256', AWS_LAMBDA_FUNCTION_VERSION='1',
  AWS_REGION='us-east-1', AWS_ACCESS_KEY_ID='t', AWS_SECRET_ACCESS_KEY='t', COUNTERSIGN_TABLE='t', COUNTERSIGN_SCHEDULE_GROUP='g',
  COUNTERSIGN_RESUME_ARN='arn:aws:lambda:us-east-1:000000000000:function:r', COUNTERSIGN_SCHEDULER_ROLE_ARN='arn:aws:iam::000000000000:role/s', COUNTERSIGN_CONFIG=cfg)
res = []
for i in range(10):
    first.clear(); t0 = time.monotonic()
    p = subprocess.Popen([sys.argv[1]], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while 't' not in first and time.monotonic() - t0 < 10: time.sleep(0.001)
    res.append((first.get('t', 99) - t0) * 1000); p.kill(); p.wait()
res.sort(); print(f"{os.path.basename(sys.argv[1])}: init to first /next: median {res[5]:.1f} ms, min {res[0]:.1f}, max {res[-1]:.1f} (n=10)")
