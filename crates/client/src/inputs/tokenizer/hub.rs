//! `--tokenizer ORG/NAME`: a tokenizer.json from the Hugging Face Hub cache, downloaded into
//! that cache when it is not there.
//!
//! The cache layout is the one the `huggingface_hub` Python package writes, so a tokenizer
//! fetched by AIPerf or transformers is found here and one fetched here is found by them:
//! `{cache}/models--ORG--NAME/refs/{revision}` holds a commit sha,
//! `snapshots/{sha}/tokenizer.json` is a relative symlink to `../../blobs/{etag}`, and the
//! blob holds the bytes. A file the Hub said is absent at a commit (404 `EntryNotFound`) is
//! marked by an empty `.no_exist/{sha}/tokenizer.json`, so it is known absent without asking
//! again. The cache is looked at first; the network is used only when the file is missing and
//! not known absent, never with `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) set.
//!
//! The download is one `GET {endpoint}/{repo}/resolve/{revision}/tokenizer.json` on the
//! project's own blocking HTTP/1.1 + rustls stack, following redirects (the Hub answers 302
//! to a CDN for large files, a relative 307 for a renamed repository). The access token is
//! `HF_TOKEN` (or `HUGGING_FACE_HUB_TOKEN`), else the file `huggingface-cli login` / `hf auth
//! login` wrote (see [`token_path`]); it is sent as a bearer token to the endpoint's own
//! origin only, never to a host it redirects to.

use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::protocol::http1::{write_request, Limits, ParseError, Progress, ResponseReader};
use crate::transport::tcp::os_message;
use crate::transport::{connect_blocking, TlsClient, TlsOptions};

/// The one file read from a repository.
pub const FILE: &str = "tokenizer.json";

/// Largest tokenizer.json downloaded (the largest public ones are tens of MiB).
pub const MAX_BYTES: usize = 256 << 20;

/// The Hub's address when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Connect timeout, and the longest wait for any single read or write.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 8;

/// The Hub settings of the process environment, read once and passed down, so tests give
/// their own without touching the test process's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubEnv {
    /// The cache root (the folder holding `models--ORG--NAME`).
    pub cache: PathBuf,
    /// `scheme://host[:port]`, no trailing slash.
    pub endpoint: String,
    /// Sent as `Authorization: Bearer ...` to the endpoint's origin.
    pub token: Option<Token>,
    /// The variable that forbids downloads (`HF_HUB_OFFLINE` or `TRANSFORMERS_OFFLINE`).
    pub offline: Option<&'static str>,
}

/// A Hub access token and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub value: String,
    /// `HF_TOKEN`, `HUGGING_FACE_HUB_TOKEN`, or `the token file PATH`, for messages.
    pub source: String,
}

impl Token {
    /// A token given in the variable `name`.
    pub fn from_var(name: &str, value: &str) -> Token {
        Token {
            value: value.trim().to_string(),
            source: name.to_string(),
        }
    }
}

/// The file `huggingface_hub` keeps the login token in: `HF_TOKEN_PATH`, else
/// `HF_HOME/token`, else `XDG_CACHE_HOME/huggingface/token`, else
/// `~/.cache/huggingface/token` (its `constants.HF_TOKEN_PATH`). Empty values count as unset.
pub fn token_path(get: impl Fn(&str) -> Option<String>) -> PathBuf {
    let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
    var("HF_TOKEN_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| hf_home(&var).join("token"))
}

/// `HF_HOME`, else `XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`.
fn hf_home(var: &impl Fn(&str) -> Option<String>) -> PathBuf {
    var("HF_HOME")
        .map(PathBuf::from)
        .or_else(|| var("XDG_CACHE_HOME").map(|x| Path::new(&x).join("huggingface")))
        .unwrap_or_else(|| {
            let home = var("HOME").unwrap_or_else(|| ".".into());
            Path::new(&home).join(".cache/huggingface")
        })
}

/// The token in the login file at `path`, if the file is there and not blank (surrounding
/// white space dropped, as `huggingface_hub` does).
fn token_from_file(path: &Path) -> Option<Token> {
    let text = std::fs::read_to_string(path).ok()?;
    let value = text.trim();
    (!value.is_empty()).then(|| Token {
        value: value.to_string(),
        source: format!("the token file {}", path.display()),
    })
}

impl HubEnv {
    /// From the process environment.
    pub fn from_process() -> HubEnv {
        HubEnv::from_vars(|name| std::env::var(name).ok())
    }

    /// From `get(name)`, with `huggingface_hub`'s precedence: `HF_HUB_CACHE`, else
    /// `HUGGINGFACE_HUB_CACHE`, else `HF_HOME/hub`, else `XDG_CACHE_HOME/huggingface/hub`,
    /// else `~/.cache/huggingface/hub`; the token from `HF_TOKEN`, else
    /// `HUGGING_FACE_HUB_TOKEN`, else the login file at [`token_path`] (read here). Empty
    /// values count as unset.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> HubEnv {
        let var = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let cache = var("HF_HUB_CACHE")
            .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home(&var).join("hub"));
        let endpoint = var("HF_ENDPOINT")
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"]
            .into_iter()
            .find_map(|name| var(name).map(|v| Token::from_var(name, &v)))
            .or_else(|| token_from_file(&token_path(var)));
        let truthy = |name: &str| {
            var(name).is_some_and(|v| {
                matches!(
                    v.trim().to_ascii_lowercase().as_str(),
                    "1" | "on" | "yes" | "true"
                )
            })
        };
        let offline = ["HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"]
            .into_iter()
            .find(|name| truthy(name));
        HubEnv {
            cache,
            endpoint,
            token,
            offline,
        }
    }

    /// `{cache}/models--ORG--NAME`.
    pub fn repo_dir(&self, repo: &str) -> PathBuf {
        self.cache
            .join(format!("models--{}", repo.replace('/', "--")))
    }
}

/// Whether `spec` has the shape of a Hub repository id: `NAME` or `ORG/NAME`, each part of
/// letters, digits, `-`, `_`, `.`, not starting or ending with `-` or `.`, no `--` or `..`,
/// at most 96 characters (the rules `huggingface_hub` checks).
pub fn is_repo_id(spec: &str) -> bool {
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !p.starts_with(['-', '.'])
            && !p.ends_with(['-', '.'])
    };
    let parts: Vec<&str> = spec.split('/').collect();
    spec.len() <= 96
        && (1..=2).contains(&parts.len())
        && parts.iter().all(|p| part_ok(p))
        && !spec.contains("--")
        && !spec.contains("..")
}

/// A revision that is itself a full commit sha.
fn is_sha(revision: &str) -> bool {
    revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A revision usable as a path under `refs/`: no empty, `.` or `..` parts.
fn revision_ok(revision: &str) -> bool {
    !revision.is_empty()
        && revision
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != ".." && !p.contains('\\'))
}

/// Why a Hub tokenizer could not be had: the tail of the one-line error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Miss {
    Offline(&'static str),
    BadRevision,
    /// 401/403: gated or private; `bool`: a token was sent.
    Denied(u16, bool),
    /// 404 (or 401) `RepositoryNotFound`; `bool`: a token was sent.
    NoRepository(bool),
    NoRevision,
    /// 404 `EntryNotFound`, with the commit the Hub named (`X-Repo-Commit`) when it did.
    NoFile(Option<String>),
    /// The cache's `.no_exist` marker says the file is absent at this commit.
    KnownAbsent(String),
    Status(u16, String),
    /// The token has characters a header value cannot carry.
    BadToken,
    Unreachable(String),
    TooLarge,
    NotHub(String),
    Cache(String),
}

impl Miss {
    /// The reason, for "... is not in the cache FOLDER and REASON".
    fn describe(&self, env: &HubEnv, repo: &str, revision: &str) -> String {
        let ep = &env.endpoint;
        match self {
            Miss::Offline(var) => format!("{var} is set, so nothing is downloaded"),
            Miss::BadRevision => {
                format!("--tokenizer-revision '{revision}' is not a branch, tag or commit name")
            }
            Miss::Denied(status, false) => format!(
                "{ep} answered {status}: the repository is gated or private; set HF_TOKEN to \
                 a token with access to it (or log in with `hf auth login`)"
            ),
            Miss::Denied(status, true) => format!(
                "{ep} answered {status}: the token from {} has no access to this gated or \
                 private repository (accept its terms on the Hub, or use another token)",
                token_source(env)
            ),
            Miss::NoRepository(false) => format!(
                "{ep} has no repository {repo} (RepositoryNotFound; a private one needs HF_TOKEN \
                 or `hf auth login`)"
            ),
            Miss::NoRepository(true) => format!(
                "{ep} has no repository {repo} that the token from {} can see \
                 (RepositoryNotFound)",
                token_source(env)
            ),
            Miss::BadToken => format!(
                "the token from {} is not one HTTP header value (it holds spaces or control \
                 characters)",
                token_source(env)
            ),
            Miss::NoRevision => format!(
                "the repository has no revision '{revision}' (RevisionNotFound); check \
                 --tokenizer-revision"
            ),
            Miss::NoFile(_) => format!(
                "the repository has no {FILE} at revision '{revision}' (EntryNotFound); only \
                 {FILE} is read, a repository's Python tokenizer code is never run"
            ),
            Miss::KnownAbsent(commit) => format!(
                "the repository has no {FILE} at revision '{revision}' (EntryNotFound, recorded \
                 by the marker .no_exist/{commit}/{FILE} in that folder; delete it to ask the \
                 Hub again); only {FILE} is read, a repository's Python tokenizer code is never \
                 run"
            ),
            Miss::Status(status, url) => format!("{url} answered HTTP {status}"),
            Miss::Unreachable(why) => format!(
                "cannot reach {ep}: {why} (HF_HUB_OFFLINE=1 uses the cache only; or give a \
                 local tokenizer.json)"
            ),
            Miss::TooLarge => format!(
                "its {FILE} is larger than the {} MiB bound",
                MAX_BYTES >> 20
            ),
            Miss::NotHub(why) => format!("{ep} does not answer as the Hub does: {why}"),
            Miss::Cache(why) => format!("cannot write into the cache: {why}"),
        }
    }
}

/// Where the token of `env` came from (only asked when there is one).
fn token_source(env: &HubEnv) -> &str {
    env.token.as_ref().map_or("HF_TOKEN", |t| t.source.as_str())
}

/// The one-line message for a Hub tokenizer that cannot be had.
pub fn miss_message(spec: &str, revision: &str, env: &HubEnv, miss: &Miss) -> String {
    format!(
        "--tokenizer {spec}: not a built-in encoding ({}) or a local path, and Hugging Face \
         Hub model {spec} (revision {revision}) is not in the cache {} and {}",
        super::BUILTIN_ENCODINGS.join(", "),
        env.repo_dir(spec).display(),
        miss.describe(env, spec, revision)
    )
}

/// The cached `tokenizer.json` of `repo` at `revision`, downloaded into the cache first when
/// it is missing (unless offline, or known absent).
pub fn resolve(repo: &str, revision: &str, env: &HubEnv) -> Result<PathBuf, Miss> {
    if !revision_ok(revision) {
        return Err(Miss::BadRevision);
    }
    if let Some(found) = cached(repo, revision, env) {
        return Ok(found);
    }
    if let Some(commit) = known_absent(repo, revision, env) {
        return Err(Miss::KnownAbsent(commit));
    }
    if let Some(var) = env.offline {
        return Err(Miss::Offline(var));
    }
    match download(repo, revision, env) {
        Ok(fetched) => store(repo, revision, env, &fetched),
        Err(Miss::NoFile(Some(commit))) => {
            mark_absent(repo, revision, env, &commit);
            Err(Miss::NoFile(Some(commit)))
        }
        Err(miss) => Err(miss),
    }
}

/// The commit `revision` stands for in the cache of `repo`: itself when it is a sha, else
/// what `refs/{revision}` holds.
fn cached_commit(repo: &str, revision: &str, env: &HubEnv) -> Option<String> {
    let sha = if is_sha(revision) {
        revision.to_string()
    } else {
        let reference = env.repo_dir(repo).join("refs").join(revision);
        std::fs::read_to_string(reference).ok()?.trim().to_string()
    };
    is_sha(&sha).then_some(sha)
}

/// `snapshots/{sha}/tokenizer.json` when `refs/{revision}` (or the revision itself, a sha)
/// names a snapshot that has it.
pub fn cached(repo: &str, revision: &str, env: &HubEnv) -> Option<PathBuf> {
    let sha = cached_commit(repo, revision, env)?;
    let file = env.repo_dir(repo).join("snapshots").join(sha).join(FILE);
    file.is_file().then_some(file)
}

/// The commit at which the cache's `.no_exist/{sha}/tokenizer.json` marker says the file is
/// absent, for the commit `revision` stands for.
pub fn known_absent(repo: &str, revision: &str, env: &HubEnv) -> Option<String> {
    let sha = cached_commit(repo, revision, env)?;
    let marker = env.repo_dir(repo).join(".no_exist").join(&sha).join(FILE);
    marker.is_file().then_some(sha)
}

/// Records that the file is absent at `commit`, as `huggingface_hub` does: the empty marker
/// `.no_exist/{commit}/tokenizer.json`, and `refs/{revision}` naming the commit. A cache that
/// cannot be written only costs the next run a request, so failures are ignored.
fn mark_absent(repo: &str, revision: &str, env: &HubEnv, commit: &str) {
    let dir = env.repo_dir(repo);
    let marker = dir.join(".no_exist").join(commit).join(FILE);
    if let Some(parent) = marker.parent() {
        if std::fs::create_dir_all(parent).is_ok() {
            let _ = std::fs::File::create(&marker);
        }
    }
    let _ = write_ref(&dir, revision, commit);
}

/// What one download brought: the bytes and the Hub's names for them.
struct Fetched {
    body: Vec<u8>,
    commit: String,
    etag: String,
}

/// `scheme://host:port` and the path of a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    tls: bool,
    /// `host:port`.
    address: String,
    /// The host alone (for TLS names and the Host header's default).
    host: String,
    path: String,
}

impl Url {
    fn parse(url: &str) -> Option<Url> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return None;
        };
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_string()),
        };
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        if authority.is_empty() {
            return None;
        }
        let host = crate::transport::tls::host_of(authority).to_string();
        let has_port = match authority.rfind(']') {
            Some(b) => authority[b..].contains(':'),
            None => authority.contains(':'),
        };
        let address = if has_port {
            authority.to_string()
        } else {
            format!("{authority}:{}", if tls { 443 } else { 80 })
        };
        Some(Url {
            tls,
            address,
            host,
            path,
        })
    }

    fn origin(&self) -> (bool, &str) {
        (self.tls, &self.address)
    }

    fn text(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.address, self.path)
    }

    /// The URL a `Location` value points to: absolute, or relative to this one's origin.
    fn join(&self, location: &str) -> Option<Url> {
        if location.starts_with("http://") || location.starts_with("https://") {
            return Url::parse(location);
        }
        if let Some(rest) = location.strip_prefix("//") {
            let scheme = if self.tls { "https" } else { "http" };
            return Url::parse(&format!("{scheme}://{rest}"));
        }
        let path = if location.starts_with('/') {
            location.to_string()
        } else {
            let base = &self.path[..self.path.rfind('/').map_or(0, |i| i + 1)];
            format!("{base}{location}")
        };
        Some(Url {
            path,
            ..self.clone()
        })
    }
}

/// Percent-encodes everything but unreserved characters (a revision such as `refs/pr/1`
/// becomes one path segment, as `huggingface_hub` sends it).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One HTTP response: status, header fields (names lower-cased), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `GET tokenizer.json`, following redirects; the commit and etag come from the first
/// answer of the endpoint's origin that carries `X-Repo-Commit` (a CDN's own ETag is not the
/// Hub's name for the blob).
fn download(repo: &str, revision: &str, env: &HubEnv) -> Result<Fetched, Miss> {
    let start = format!(
        "{}/{repo}/resolve/{}/{FILE}",
        env.endpoint,
        encode_segment(revision)
    );
    let Some(mut url) = Url::parse(&start) else {
        return Err(Miss::NotHub(format!(
            "HF_ENDPOINT must start with http:// or https:// (got '{}')",
            env.endpoint
        )));
    };
    let token = env.token.as_ref().map(|t| t.value.as_str());
    if token.is_some_and(|t| !t.bytes().all(|b| b.is_ascii_graphic())) {
        return Err(Miss::BadToken);
    }
    let home = url.clone();
    let mut names: Option<(String, String)> = None;
    for _ in 0..=MAX_REDIRECTS {
        let same_origin = url.origin() == home.origin();
        let token = token.filter(|_| same_origin);
        let answer = get(&url, token)?;
        if same_origin && names.is_none() {
            if let Some(commit) = answer.header("x-repo-commit") {
                let etag = answer
                    .header("x-linked-etag")
                    .or_else(|| answer.header("etag"))
                    .map(normalize_etag);
                if let Some(etag) = etag {
                    names = Some((commit.trim().to_string(), etag));
                }
            }
        }
        match answer.status {
            200 => {
                let Some((commit, etag)) = names else {
                    return Err(Miss::NotHub(format!(
                        "{} answered 200 without X-Repo-Commit and ETag",
                        url.text()
                    )));
                };
                if !is_sha(&commit) {
                    return Err(Miss::NotHub(format!(
                        "X-Repo-Commit '{commit}' is not a sha"
                    )));
                }
                if !etag_ok(&etag) {
                    return Err(Miss::NotHub(format!("ETag '{etag}' is not a blob name")));
                }
                return Ok(Fetched {
                    body: answer.body,
                    commit,
                    etag,
                });
            }
            301 | 302 | 303 | 307 | 308 => {
                let next = answer.header("location").and_then(|l| url.join(l.trim()));
                match next {
                    Some(next) => url = next,
                    None => {
                        return Err(Miss::NotHub(format!(
                            "{} answered {} with no usable Location",
                            url.text(),
                            answer.status
                        )))
                    }
                }
            }
            status => return Err(classify(status, &answer, env.token.is_some(), &url)),
        }
    }
    Err(Miss::NotHub(format!("more than {MAX_REDIRECTS} redirects")))
}

/// An error answer, by the Hub's `X-Error-Code` first, else by status; an `EntryNotFound`
/// keeps the commit its `X-Repo-Commit` names.
fn classify(status: u16, answer: &Answer, token: bool, url: &Url) -> Miss {
    match answer.header("x-error-code") {
        Some("RepositoryNotFound") => Miss::NoRepository(token),
        Some("RevisionNotFound") => Miss::NoRevision,
        Some("EntryNotFound") => {
            let commit = answer.header("x-repo-commit").map(str::trim);
            Miss::NoFile(commit.filter(|c| is_sha(c)).map(str::to_string))
        }
        Some("GatedRepo") => Miss::Denied(status, token),
        _ if status == 401 || status == 403 => Miss::Denied(status, token),
        _ if status == 404 => Miss::NoFile(None),
        _ => Miss::Status(status, url.text()),
    }
}

/// `W/"abc"` → `abc`.
fn normalize_etag(raw: &str) -> String {
    let t = raw.trim();
    let t = t.strip_prefix("W/").unwrap_or(t);
    t.trim_matches('"').to_string()
}

/// An etag safe as a file name.
fn etag_ok(etag: &str) -> bool {
    !etag.is_empty()
        && etag.len() <= 128
        && etag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

/// One GET on a fresh connection (`Connection: close`).
fn get(url: &Url, token: Option<&str>) -> Result<Answer, Miss> {
    let tls = if url.tls {
        let opts = TlsOptions::new("--ssl-https", &[b"http/1.1"]);
        Some(TlsClient::new(&opts, &url.host).map_err(|e| Miss::Unreachable(e.msg.clone()))?)
    } else {
        None
    };
    let mut stream = connect_blocking(&url.address, TIMEOUT, "the Hub", tls.as_ref())
        .map_err(|e| Miss::Unreachable(e.msg.clone()))?;
    let mut headers = vec![
        (
            "User-Agent".to_string(),
            format!("inferperf/{}", env!("CARGO_PKG_VERSION")),
        ),
        ("Accept-Encoding".to_string(), "identity".to_string()),
        ("Connection".to_string(), "close".to_string()),
    ];
    if let Some(token) = token {
        headers.push(("Authorization".to_string(), format!("Bearer {token}")));
    }
    let mut request = Vec::new();
    let host = url
        .address
        .strip_suffix(if url.tls { ":443" } else { ":80" });
    write_request(
        &mut request,
        "GET",
        host.unwrap_or(&url.address),
        &url.path,
        &headers,
        b"",
    );
    let io = |e: std::io::Error| Miss::Unreachable(format!("{}: {}", url.text(), os_message(&e)));
    stream.write_all(&request).map_err(io)?;
    let mut reader = ResponseReader::with_limits(Limits {
        max_body_bytes: MAX_BYTES,
        ..Limits::default()
    });
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let head = loop {
        let progress = match stream.read(&mut chunk) {
            Ok(0) => reader.on_eof(&buf),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                reader.advance(&buf)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        match progress {
            Ok(Progress::NeedMore) => {}
            Ok(Progress::Done(head)) => break head,
            Err(ParseError::BodyTooLarge { .. } | ParseError::ContentLengthTooLarge { .. }) => {
                return Err(Miss::TooLarge)
            }
            Err(e) => return Err(Miss::Unreachable(format!("{}: {e}", url.text()))),
        }
    };
    let body = reader.body(&buf).to_vec();
    Ok(Answer {
        status: head.status,
        headers: final_headers(&buf),
        body,
    })
}

/// Header fields of the final (non-1xx) response head at the start of `buf`.
fn final_headers(buf: &[u8]) -> Vec<(String, String)> {
    let mut at = 0usize;
    loop {
        let mut fields = [httparse::EMPTY_HEADER; crate::protocol::http1::MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut fields);
        let Ok(httparse::Status::Complete(len)) = resp.parse(&buf[at..]) else {
            return Vec::new();
        };
        if resp.code.is_some_and(|c| (100..200).contains(&c)) {
            at += len;
            continue;
        }
        return resp
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_ascii_lowercase(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect();
    }
}

/// Writes the blob, the snapshot link and the ref, as `huggingface_hub` lays them out.
fn store(repo: &str, revision: &str, env: &HubEnv, got: &Fetched) -> Result<PathBuf, Miss> {
    let dir = env.repo_dir(repo);
    let fail = |what: &Path, e: std::io::Error| {
        Miss::Cache(format!("{}: {}", what.display(), os_message(&e)))
    };
    let blobs = dir.join("blobs");
    std::fs::create_dir_all(&blobs).map_err(|e| fail(&blobs, e))?;
    let blob = blobs.join(&got.etag);
    if !blob.is_file() {
        let temp = blobs.join(format!("{}.{}.incomplete", got.etag, std::process::id()));
        let written = std::fs::File::create(&temp).and_then(|mut f| {
            f.write_all(&got.body)?;
            f.sync_all()
        });
        if let Err(e) = written.and_then(|()| std::fs::rename(&temp, &blob)) {
            let _ = std::fs::remove_file(&temp);
            return Err(fail(&blob, e));
        }
    }
    let snapshot = dir.join("snapshots").join(&got.commit);
    std::fs::create_dir_all(&snapshot).map_err(|e| fail(&snapshot, e))?;
    let link = snapshot.join(FILE);
    if !link.is_file() {
        let _ = std::fs::remove_file(&link);
        let target = Path::new("../../blobs").join(&got.etag);
        link_or_copy(&target, &blob, &link).map_err(|e| fail(&link, e))?;
    }
    write_ref(&dir, revision, &got.commit).map_err(|(path, e)| fail(&path, e))?;
    Ok(link)
}

/// `refs/{revision}` holding `commit` (nothing for a revision that is the commit itself),
/// written whole through a temporary file; on failure, the path and the error.
fn write_ref(dir: &Path, revision: &str, commit: &str) -> Result<(), (PathBuf, std::io::Error)> {
    if revision == commit {
        return Ok(());
    }
    let reference = dir.join("refs").join(revision);
    if let Some(parent) = reference.parent() {
        std::fs::create_dir_all(parent).map_err(|e| (parent.to_path_buf(), e))?;
    }
    let temp = reference.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&temp, commit)
        .and_then(|()| std::fs::rename(&temp, &reference))
        .map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            (reference, e)
        })
}

#[cfg(unix)]
fn link_or_copy(target: &Path, _blob: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn link_or_copy(_target: &Path, blob: &Path, link: &Path) -> std::io::Result<()> {
    std::fs::copy(blob, link).map(|_| ())
}

#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod stand_in;

#[cfg(test)]
#[path = "hub_tests.rs"]
mod tests;
