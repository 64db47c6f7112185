"""Writes the run folder of benches/peers/nginx.sh: nginx.conf and the gRPC answers.

nginx then answers as a KServe v2 (Triton) server for model "identity", FP32[16] in and out,
with fixed bodies: HTTP/1.1 JSON on one port, gRPC over cleartext HTTP/2 on another. The two
infer handlers are a few lines of Lua (libnginx-mod-http-lua) that copy the request's "id"
into the answer, because perf_analyzer's async mode pairs answers with requests by id.

    python3 render.py RUN_DIR HTTP_PORT GRPC_PORT WORKERS

The protobuf messages are encoded here by hand from the field numbers of Triton's
grpc_service.proto and model_config.proto (github.com/triton-inference-server/common,
protobuf/), so nothing beyond python3 is needed.
"""

import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = "identity"
SHAPE = [16]
TYPE_FP32 = 11  # model_config.proto DataType


def uvarint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if n == 0:
            return bytes(out)


def field_bytes(number, value):
    """A length-delimited field (wire type 2)."""
    if isinstance(value, str):
        value = value.encode()
    return uvarint(number << 3 | 2) + uvarint(len(value)) + value


def field_int(number, value):
    """A varint field (wire type 0)."""
    return uvarint(number << 3) + uvarint(value)


def packed_ints(number, values):
    return field_bytes(number, b"".join(uvarint(v) for v in values))


def tensor_meta(name, shape_field):
    return field_bytes(1, name) + field_bytes(2, "FP32") + packed_ints(shape_field, SHAPE)


def grpc_message(payload):
    """gRPC length-prefixed message: uncompressed flag, then a big-endian u32 length."""
    return b"\0" + struct.pack(">I", len(payload)) + payload


# ModelInferResponse: model_name 1, model_version 2, id 3, outputs 5, raw_output_contents 6.
INFER_HEAD = field_bytes(1, MODEL) + field_bytes(2, "1")
INFER_TAIL = field_bytes(5, tensor_meta("OUTPUT0", 3)) + field_bytes(
    6, struct.pack("<16f", *[float(i) for i in range(16)])
)

ANSWERS = {
    # ServerLiveResponse / ServerReadyResponse / ModelReadyResponse: bool field 1.
    "ServerLive": field_int(1, 1),
    "ServerReady": field_int(1, 1),
    "ModelReady": field_int(1, 1),
    # ServerMetadataResponse: name 1, version 2.
    "ServerMetadata": field_bytes(1, "nginx-fixed") + field_bytes(2, "0"),
    # ModelMetadataResponse: name 1, versions 2, platform 3, inputs 4, outputs 5.
    "ModelMetadata": field_bytes(1, MODEL)
    + field_bytes(2, "1")
    + field_bytes(3, MODEL)
    + field_bytes(4, tensor_meta("INPUT0", 3))
    + field_bytes(5, tensor_meta("OUTPUT0", 3)),
    # ModelConfigResponse.config 1 = ModelConfig: name 1, platform 2, max_batch_size 4,
    # input 5 (name 1, data_type 2, dims 4), output 6 (name 1, data_type 2, dims 3), backend 17.
    "ModelConfig": field_bytes(
        1,
        field_bytes(1, MODEL)
        + field_bytes(2, "")
        + field_int(4, 0)
        + field_bytes(5, field_bytes(1, "INPUT0") + field_int(2, TYPE_FP32) + packed_ints(4, SHAPE))
        + field_bytes(6, field_bytes(1, "OUTPUT0") + field_int(2, TYPE_FP32) + packed_ints(3, SHAPE))
        + field_bytes(17, MODEL),
    ),
    "ModelInfer": INFER_HEAD + INFER_TAIL,
}

CONF = r"""
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
daemon off;
worker_processes {workers};
worker_rlimit_nofile 20000;
pid {run}/nginx.pid;
error_log {run}/error.log warn;
events {{ worker_connections 16384; multi_accept on; accept_mutex off; }}
http {{
    access_log off;
    server_tokens off;
    tcp_nodelay on;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    client_body_buffer_size 1m;
    client_max_body_size 64m;
    client_body_temp_path {run}/tmp-body;
    proxy_temp_path {run}/tmp-proxy;
    fastcgi_temp_path {run}/tmp-fastcgi;
    uwsgi_temp_path {run}/tmp-uwsgi;
    scgi_temp_path {run}/tmp-scgi;
    default_type application/json;

    init_by_lua_block {{
        local function read(path)
            local f = assert(io.open(path, "rb"))
            local data = f:read("*a")
            f:close()
            return data
        end
        ANSWER_JSON = read("{here}/infer.json")
        GRPC_HEAD = read("{run}/grpc/ModelInfer.head")
        GRPC_TAIL = read("{run}/grpc/ModelInfer.tail")
    }}

    server {{
        listen 127.0.0.1:{http} reuseport backlog=4096;
        location ~ ^/v2/models/identity(/versions/[^/]+)?/infer$ {{
            content_by_lua_block {{
                ngx.req.read_body()
                local body = ngx.req.get_body_data() or ""
                local id = body:sub(1, 256):match('^%s*{{%s*"id"%s*:%s*"([^"\\]*)"')
                local answer = ANSWER_JSON
                if id then
                    answer = '{{"id":"' .. id .. '",' .. ANSWER_JSON:sub(2)
                end
                ngx.header.content_length = #answer
                ngx.print(answer)
            }}
        }}
        location = /static/infer {{ return 200 '{infer_json}'; }}
        location ~ ^/v2/models/identity(/versions/[^/]+)?/config$ {{ return 200 '{config_json}'; }}
        location ~ ^/v2/models/identity(/versions/[^/]+)?/ready$ {{ return 200 ''; }}
        location ~ ^/v2/models/identity(/versions/[^/]+)?$ {{ return 200 '{metadata_json}'; }}
        location = /v2/health/ready {{ return 200 ''; }}
        location = /v2/health/live {{ return 200 ''; }}
        location = /v2 {{ return 200 '{{"name":"nginx-fixed","version":"0","extensions":[]}}'; }}
        location = /nginx_status {{ stub_status; }}
        location / {{ return 404 '{{"error":"not found"}}'; }}
    }}

    server {{
        listen 127.0.0.1:{grpc} http2 reuseport backlog=4096;
        http2_max_concurrent_streams 1024;
        open_file_cache max=64 inactive=3600s;
        open_file_cache_valid 3600s;

        location = /inference.GRPCInferenceService/ModelInfer {{
            default_type application/grpc;
            add_trailer grpc-status 0;
            content_by_lua_block {{
                ngx.req.read_body()
                local body = ngx.req.get_body_data() or ""
                -- ModelInferRequest after the 5-byte gRPC prefix: model_name (1),
                -- model_version (2), id (3), all length-delimited and in that order.
                local at, id = 6, nil
                while at <= #body do
                    local key = body:byte(at)
                    at = at + 1
                    if key % 8 ~= 2 then break end
                    local size, scale = 0, 1
                    repeat
                        local b = body:byte(at)
                        at = at + 1
                        size = size + (b % 128) * scale
                        scale = scale * 128
                    until b < 128
                    local number = (key - 2) / 8
                    if number == 3 then id = body:sub(at, at + size - 1) break end
                    if number > 3 then break end
                    at = at + size
                end
                local msg = GRPC_HEAD
                if id and #id < 128 then msg = msg .. "\26" .. string.char(#id) .. id end
                msg = msg .. GRPC_TAIL
                local n = #msg
                local prefix = string.char(0, math.floor(n / 16777216) % 256,
                    math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
                ngx.header.content_length = n + 5
                ngx.print(prefix .. msg)
            }}
        }}
        # The other calls are files; nginx refuses a POST to a file (405), and error_page
        # turns that into an internal GET of it with status 200.
        location ~ ^/inference\.GRPCInferenceService/(?<call>ServerLive|ServerReady|ModelReady|ServerMetadata|ModelMetadata|ModelConfig)$ {{
            error_page 405 =200 /answers/$call.bin;
            return 405;
        }}
        location /answers/ {{
            internal;
            alias {run}/grpc/;
            types {{ }}
            default_type application/grpc;
            etag off;
            if_modified_since off;
            add_header Last-Modified "";
            add_trailer grpc-status 0;
        }}
        location / {{
            default_type application/grpc;
            add_header grpc-status 12 always;
            add_header grpc-message "not answered by the fixed nginx server" always;
            return 200;
        }}
    }}
}}
"""


def main():
    run, http, grpc, workers = sys.argv[1:5]
    os.makedirs(os.path.join(run, "grpc"), exist_ok=True)
    for call, payload in ANSWERS.items():
        with open(os.path.join(run, "grpc", call + ".bin"), "wb") as f:
            f.write(grpc_message(payload))
    for name, part in (("ModelInfer.head", INFER_HEAD), ("ModelInfer.tail", INFER_TAIL)):
        with open(os.path.join(run, "grpc", name), "wb") as f:
            f.write(part)

    def json_file(name):
        with open(os.path.join(HERE, name)) as f:
            return f.read().strip()

    conf = CONF.format(
        run=run,
        here=HERE,
        http=http,
        grpc=grpc,
        workers=workers,
        infer_json=json_file("infer.json"),
        config_json=json_file("config.json"),
        metadata_json=json_file("metadata.json"),
    )
    with open(os.path.join(run, "nginx.conf"), "w") as f:
        f.write(conf)


if __name__ == "__main__":
    main()
