"""A real nginx (Debian's) in front of the suite's servers, with the site file of deploy/nginx/ itself."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from messaging.testing.servers import free_port

from .servers import ROOT, wait_until

SITE = ROOT / "deploy" / "nginx" / "messaging.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def site_for(upstream_port: int, listen_port: int, static_root: Path) -> str:
    """deploy/nginx/messaging.conf with its marked lines set for a test: the rest is the file as shipped."""
    text = SITE.read_text()
    edits = {
        "    server 127.0.0.1:8000;": f"    server 127.0.0.1:{upstream_port};",
        "    listen 80;": f"    listen 127.0.0.1:{listen_port};",
        "    listen [::]:80;\n": "",
        "    server_name chat.example.org;": "    server_name 127.0.0.1 localhost;",
        "    alias /srv/messaging/staticfiles/;": f"    alias {static_root}/;",
    }
    for line, replacement in edits.items():
        assert line in text, f"{SITE} no longer has {line.strip()!r}: update the test's edits"
        text = text.replace(line, replacement)
    return text


class Nginx:
    """One nginx master (in the foreground) serving the deploy site on a port of its own."""

    def __init__(self, directory: Path, upstream_port: int, static_root: Path) -> None:
        self.dir = directory
        self.port = free_port()
        self.upstream_port = upstream_port
        self.static_root = static_root
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> Path:
        (self.dir / "site.conf").write_text(site_for(self.upstream_port, self.port, self.static_root))
        main = self.dir / "nginx.conf"
        main.write_text(f"""
daemon off;
# The suite's files are root's alone (pytest's temporary folders are 0700).
user root;
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    include /etc/nginx/mime.types;
    access_log {self.dir}/access.log;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    include {self.dir}/site.conf;
}}
""")
        return main

    def start(self) -> Nginx:
        main = self.config()
        check = subprocess.run([NGINX, "-t", "-c", str(main), "-p", str(self.dir)], capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
        self.process = subprocess.Popen(
            [NGINX, "-c", str(main), "-p", str(self.dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        wait_until(
            lambda: (
                subprocess.run(
                    ["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{self.port}"], capture_output=True
                ).returncode
                == 0
            ),
            10,
            "nginx",
        )
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def log(self) -> str:
        path = self.dir / "error.log"
        return path.read_text() if path.exists() else ""
