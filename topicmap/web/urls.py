"""URL judgements: validity, strict and lossy normalization, site ("distinctive domain"), shorteners,
homepages and the URL variants a story is known by.

Follows Media Cloud's URL rules (fix_common_url_mistakes, normalize_url, normalize_url_lossy,
get_url_distinctive_domain, is_shortened_url, is_homepage_url) with these bugs fixed (each also noted where
it is done):

- the lossy host-prefix strip (``www.``, ``m.``, ``news.``…) checked for "another dot later in the URL",
  which could be in the path, so ``http://archive.org/x.pdf`` became ``http://org/x.pdf``; and its "one
  arbitrary extra character" turned ``me.example.com`` into ``example.com``. Here a label is stripped only
  when what remains is still a registrable domain, and the extra character must be a digit (www3, m1);
- the distinctive domain kept the last two labels unless the host ended in ``.(gov|org|com|co).XX``, so
  every British university was ``ac.uk``; here it is the registrable domain from the Public Suffix List,
  with Media Cloud's whole-host platforms (``*.blogspot.*``, ``*.wordpress.com``…) kept whole;
- ``http://host?q`` repair matched across a ``?`` inside the query;
- YouTube normalization matched any host ending in "youtube.com" (``notyoutube.com``) and only
  ``watch?v=`` as the first parameter; ``youtu.be/ID`` was not recognised;
- the lossy key kept tracking parameters, so ``story?utm_source=x`` and ``story`` were different stories;
  here the lossy key starts from the strict normalization and drops them too.

Every public function is total: None, empty or garbage in gives None/False/[] out, never an exception.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import lru_cache, wraps
from urllib.parse import unquote

import idna
from tld import get_tld

from topicmap.web.shorteners import URL_SHORTENER_HOSTNAMES

# Longest URL stored (topic_links.url, story_urls.url are cut to this: Media Cloud's MAX_URL_LENGTH).
MAX_URL_LENGTH = 1024

_HTTP_URL_RE = re.compile(r"^https?://[^\s/$.?#].[^\s]*$", re.I)
_ASCII_HOST_RE = re.compile(r"^[a-z0-9_\-.]+$")
_HEX_RE = re.compile(r"^[0-9a-f]+$", re.I)
_PERCENT_RE = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = "!$&'()*+,;="
_PATH_SAFE = frozenset(_UNRESERVED | set(_SUB_DELIMS) | set(":@/"))
_QUERY_SAFE = frozenset(_PATH_SAFE | set("?"))
_USERINFO_SAFE = frozenset(_UNRESERVED | set(_SUB_DELIMS) | {":"})
#: a component made of these characters only (no escape at all) is already normalized: most URLs' parts
_ALREADY_NORMAL = {
    safe: re.compile("[" + "".join(map(re.escape, sorted(safe))) + "]*")
    for safe in (_PATH_SAFE, _QUERY_SAFE, _USERINFO_SAFE)
}

# ------------------------------------------------------------------------------------------------
# fixing and parsing


def _cached_for_strings(function):  # noqa: ANN001, ANN202 - keeps the wrapped signature
    """Memoize a pure URL judgement for str input (a crawl asks about the same URLs and hosts again and
    again); other input goes straight through, so unhashable garbage still gets None/False, not an error."""
    cached = lru_cache(maxsize=131072)(function)

    @wraps(function)
    def wrapper(url):  # noqa: ANN001, ANN202
        return cached(url) if type(url) is str else function(url)

    wrapper.cache_clear = cached.cache_clear
    return wrapper


def _as_text(url: object) -> str | None:
    if isinstance(url, bytes | bytearray):
        return bytes(url).decode("utf-8", "replace")
    return url if isinstance(url, str) else None


@_cached_for_strings
def fix_common_url_mistakes(url: str | None) -> str | None:
    """Repair the URL typos Media Cloud saw in the wild (its fix_common_url_mistakes); None for None/blank
    input."""
    url = _as_text(url)
    if url is None:
        return None
    # Browsers drop tabs and newlines anywhere in a URL (WHATWG URL standard); pasted links carry them.
    url = re.sub(r"[\t\n\r]", "", url).strip()
    if not url:
        return None
    url = re.sub(r"(https?://)https?:?//", r"\1", url, flags=re.I)  # http://http://x
    url = re.sub(r"(https?:/)(\w)", r"\1/\2", url, flags=re.I)  # http:/x
    url = re.sub(r"^//", "http://", url)  # protocol-relative
    url = url.replace("\\", "/")
    url = re.sub(r"^(https?://[\w\-.]+):($|/)", r"\1\2", url, flags=re.I)  # empty port "host:/"
    # http://host?q → http://host/?q. Media Cloud used [^/]+, which also matched up to a later '?' inside
    # the query (http://host?a?b → http://host?a/?b); stop at the first '?' or '#'.
    url = re.sub(r"^(https?://[^/?#]+)([?#])", r"\1/\2", url, flags=re.I)
    return url.replace(" ", "%20")


@dataclass(frozen=True)
class _Url:
    scheme: str  # "http" or "https"
    userinfo: str  # without the '@'
    host: str  # ASCII (punycode), lowercase, no trailing dot; IPv6 in brackets
    port: str  # "" for the scheme default
    path: str
    query: str | None  # None when there is no '?'
    fragment: str | None

    def unsplit(self) -> str:
        netloc = self.host + (f":{self.port}" if self.port else "")
        if self.userinfo:
            netloc = f"{self.userinfo}@{netloc}"
        url = f"{self.scheme}://{netloc}{self.path}"
        if self.query is not None:
            url += "?" + self.query
        if self.fragment is not None:
            url += "#" + self.fragment
        return url


def _canonical_host(host: str) -> str | None:
    """Lowercase ASCII form of a host (IDN → punycode), or None if it cannot be a host name."""
    if "%" in host:
        host = unquote(host)
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        try:
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return None
    if host.endswith("."):
        host = host[:-1]
    if not host or len(host) > 253:
        return None
    if not host.isascii():
        try:
            host = idna.encode(host, uts46=True).decode("ascii")
        except (idna.IDNAError, UnicodeError, ValueError):
            try:  # IDNA 2003 still admits the symbol hosts some shorteners use (➡.ws)
                host = host.encode("idna").decode("ascii")
            except (UnicodeError, ValueError):
                return None
    if not _ASCII_HOST_RE.match(host):
        return None
    labels = host.split(".")
    if any(not label or len(label) > 63 for label in labels):
        return None
    return host


def _normalize_escapes(component: str, safe: frozenset[str]) -> str:
    """Percent-encode what must be, upper-case escapes and decode escaped unreserved characters."""
    if _ALREADY_NORMAL[safe].fullmatch(component):
        return component  # one regex instead of a Python step per character (link mining parses many URLs)
    out: list[str] = []
    i, length = 0, len(component)
    while i < length:
        char = component[i]
        if char == "%":
            match = _PERCENT_RE.match(component, i)
            if match:
                decoded = chr(int(match.group(1), 16))
                out.append(decoded if decoded in _UNRESERVED else "%" + match.group(1).upper())
                i += 3
                continue
            out.append("%25")
        elif char in safe:
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        i += 1
    return "".join(out)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4: resolve '.' and '..' segments."""
    if "." not in path:
        return path
    segments = path.split("/")
    output: list[str] = []
    for segment in segments[1:] if path.startswith("/") else segments:
        if segment == ".":
            continue
        if segment == "..":
            if output:
                output.pop()
            continue
        output.append(segment)
    if segments[-1] in (".", ".."):
        output.append("")
    return "/" + "/".join(output)


_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _parse(url: str | None) -> _Url | None:
    """Split and canonicalize an http(s) URL: lowercase scheme and host, IDN host in punycode, default
    port dropped, dot segments resolved, percent-encoding normalized. None if it is not one."""
    if not url or not _HTTP_URL_RE.match(url):
        return None
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    rest, hash_mark, fragment = rest.partition("#")
    rest, question_mark, query = rest.partition("?")
    slash = rest.find("/")
    authority, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    userinfo, at, hostport = authority.rpartition("@")
    if not at:
        userinfo = ""
    port = ""
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            return None
        host, port_part = hostport[: close + 1], hostport[close + 1 :]
        if port_part and not port_part.startswith(":"):
            return None
        port = port_part[1:]
    else:
        host, _, port = hostport.partition(":")
    if port:
        if not port.isdigit() or not 0 < int(port) <= 65535:
            return None
        port = str(int(port))
        if port == _DEFAULT_PORTS[scheme]:
            port = ""
    canonical_host = _canonical_host(host)
    if canonical_host is None:
        return None
    path = _remove_dot_segments(_normalize_escapes(path, _PATH_SAFE)) or "/"
    return _Url(
        scheme=scheme,
        userinfo=_normalize_escapes(userinfo, _USERINFO_SAFE),
        host=canonical_host,
        port=port,
        path=path,
        query=_normalize_escapes(query, _QUERY_SAFE) if question_mark else None,
        fragment=_normalize_escapes(fragment, _QUERY_SAFE) if hash_mark else None,
    )


_SCHEME_RE = re.compile(r"^([a-z][a-z0-9+.\-]*):(?!\d)", re.I)


def _with_scheme(url: str) -> str | None:
    """Prefix http:// to a scheme-less URL ("example.com/x"); None for another scheme (mailto:, ftp:)."""
    scheme = _SCHEME_RE.match(url)
    if scheme:
        return url if scheme.group(1).lower() in ("http", "https") else None
    return "http://" + url.lstrip("/")


@_cached_for_strings
def is_http_url(url: str | None) -> bool:
    """True for an absolute http(s) URL with a valid host (IDN hosts must be IDNA-encodable)."""
    url = _as_text(url)
    try:
        return bool(url) and _parse(url) is not None
    except Exception:  # noqa: BLE001 - total function by contract
        return False


# ------------------------------------------------------------------------------------------------
# strict normalization

# Query parameters that only track clicks or sessions (Media Cloud's normalize_url drops these).
_TRACKING_PARAMS = frozenset(
    name.lower()
    for name in (
        # Facebook
        *("fb_action_ids", "fb_action_types", "fb_source", "fb_ref", "action_object_map", "action_type_map"),
        *("action_ref_map", "fsrc_fb_noscript"),
        # Yandex
        *("yclid", "_openstat"),
        # sessions, campaigns, referrers
        *("PHPSESSID", "PHPSESSIONID", "cid", "s_cid", "sid", "ncid", "ir", "ref", "oref", "eref"),
        *("ns_mchannel", "ns_campaign", "ITO", "wprss", "custom_click", "source", "feedName", "feedType"),
        *("skipmobile", "skip_mobile", "altcast_code", "sort"),
        # added here: today's ad click identifiers, which make every shared copy of a URL unique
        *("fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "mc_cid", "mc_eid", "igshid"),
        *("twclid", "ttclid", "wt.mc_id"),
    )
)
# Compared in lowercase (Media Cloud's furl lookup was case-sensitive, so "Ref" or "phpsessid" survived).
_HOST_TRACKING_PARAMS = (
    ("facebook.com", frozenset({"ref", "fref", "hc_location"})),
    (
        "nytimes.com",
        frozenset(
            {"emc", "partner", "_r", "hp", "inline", "smid", "wt.z_sma", "bicmp", "bicmlukp", "bicmst"}
            | {"bicmet", "abt", "abg"}
        ),
    ),
    ("livejournal.com", frozenset({"thread", "nojs"})),
    ("google.", frozenset({"gws_rd", "ei"})),
)
_TRACKING_PREFIXES = ("_", "utm_", "ga_")


def _clean_query(query: str | None, host: str) -> str | None:
    """Drop tracking parameters and empty values; None when nothing is left."""
    if not query:
        return None
    host_params = [params for marker, params in _HOST_TRACKING_PARAMS if marker in host]
    kept: list[str] = []
    for pair in query.split("&"):
        if not pair:
            continue
        raw_name, equals, value = pair.partition("=")
        name = unquote(raw_name.replace("+", " ")).lower()
        if not name or name in _TRACKING_PARAMS or name.startswith(_TRACKING_PREFIXES):
            continue
        if any(name in params for params in host_params):
            continue
        if name == "nk" and _HEX_RE.match(unquote(value)):  # Australian sites' hex tracking hash
            continue
        kept.append(pair if value else raw_name)  # "a=" → "a" (Media Cloud drops empty values)
    return "&".join(kept) if kept else None


@_cached_for_strings
def normalize_url(url: str | None) -> str | None:
    """Strict normalization (Media Cloud's normalize_url): common mistakes fixed; scheme and host lowercased;
    default port, fragment, tracking parameters and empty parameter values dropped. None if not an http(s)
    URL."""
    try:
        parsed = _parse(fix_common_url_mistakes(url))
        if parsed is None:
            return None
        cleaned = _Url(
            parsed.scheme,
            parsed.userinfo,
            parsed.host,
            parsed.port,
            parsed.path,
            _clean_query(parsed.query, parsed.host),
            None,
        )
        return cleaned.unsplit()
    except Exception:  # noqa: BLE001 - total function by contract
        return None


# ------------------------------------------------------------------------------------------------
# lossy normalization (the matching key)

_YOUTUBE_ID_PATH_RE = re.compile(r"^/(?:embed|v|shorts)/([^/?#&]+)")
_ARCHIVE_IS_RE = re.compile(r"^https?://archive\.(?:is|today|ph|li|vn|fo|md)/[a-z0-9]+/[a-z0-9]+/(.+)$", re.I)
# Host labels that name a variant of the same site (normalize_url_lossy's host-prefix strip), optionally with
# one digit.
_SITE_VARIANT_LABEL_RE = re.compile(
    r"^(?:(?:m|beta|media|data|image|www?|cdn|topic|article|news|archive|blog|video|search|preview|login|"
    r"shop|sports?|act|donate|press|web|photos?)\d?|\d+)$"
)


def _is_youtube_host(host: str) -> bool:
    return host in ("youtube.com", "youtube-nocookie.com") or host.endswith(
        (".youtube.com", ".youtube-nocookie.com")
    )


def _normalize_youtube(parsed: _Url) -> _Url:
    """One form per YouTube video/channel: https://www.youtube.com/…, only the `v` parameter kept."""
    host = parsed.host
    if host == "youtu.be":
        video = parsed.path.strip("/").split("/")[0]
        if video:
            return _Url("https", "", "www.youtube.com", "", "/watch", f"v={video}", None)
        return parsed
    if not _is_youtube_host(host):
        return parsed
    match = _YOUTUBE_ID_PATH_RE.match(parsed.path)
    if match:
        return _Url("https", "", "www.youtube.com", "", "/watch", f"v={match.group(1)}", None)
    video = None
    for pair in (parsed.query or "").split("&"):
        name, _, value = pair.partition("=")
        if name == "v" and value:
            video = value
            break
    return _Url("https", "", "www.youtube.com", "", parsed.path, f"v={video}" if video else None, None)


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@lru_cache(maxsize=65536)
def _registrable_domain(host: str) -> str | None:
    """eTLD+1 from the Public Suffix List (private section included: someone.github.io), or None.

    A TLD the list does not know (the reserved .test, .example, .internal, a new gTLD) follows the PSL
    algorithm's default rule "*": the last label is the public suffix, so herald.test is a site and
    www.herald.test its www variant. (The tld package simply fails on such hosts.)"""
    try:
        result = get_tld("http://" + host, as_object=True, fail_silently=True, fix_protocol=False)
    except Exception:  # noqa: BLE001 - tld raises various errors on odd hosts
        result = None
    if result is None:
        labels = host.split(".")
        return ".".join(labels[-2:]) if len(labels) >= 2 and all(labels[-2:]) else None
    fld, suffix = getattr(result, "fld", None), getattr(result, "tld", None)
    # tld reports a bare public suffix ("co.uk", "github.io") as its own fld: that is no site.
    return fld if fld and fld != suffix else None


def _strip_site_variant_labels(host: str) -> str:
    """www.example.com / m.example.com / news.example.co.uk / www.m.example.com → the site's host.

    Media Cloud stripped the label whenever another '.' appeared anywhere later in the URL (even in the
    path), which reduced http://archive.org/x.pdf to http://org/x.pdf; here the rest must still be a
    registrable domain, and IP addresses are never touched. Media Cloud also stripped one label only, so
    www.m.example.com kept "m." while m.example.com lost it: the two never matched, and a key was not its
    own key. Here every leading variant label goes."""
    while not _is_ip(host):
        label, dot, rest = host.partition(".")
        if not dot or not _SITE_VARIANT_LABEL_RE.match(label):
            break
        registrable = _registrable_domain(rest)
        if not registrable or (rest != registrable and not rest.endswith("." + registrable)):
            break
        host = rest
    return host


@_cached_for_strings
def normalize_url_lossy(url: str | None) -> str | None:
    """Matching key for "same story" (Media Cloud's normalize_url_lossy): the strict form, lowercased,
    site-variant host prefix (www., m., news., …) dropped, YouTube and archive.is links unwrapped, fragment
    dropped, repeated slashes collapsed, http forced, query kept. None for None/empty or when no http(s) URL can be made."""
    try:
        fixed = fix_common_url_mistakes(url)
        if not fixed:
            return None
        fixed = _with_scheme(fixed)
        archived = _ARCHIVE_IS_RE.match(fixed or "")
        if archived:
            fixed = _with_scheme(archived.group(1))
        parsed = _parse(fixed)
        if parsed is None:
            return None
        parsed = _normalize_youtube(parsed)
        host = parsed.host
        if "r2.ly" not in host:  # r2.ly redirects through the host name itself (543.r2.ly)
            host = _strip_site_variant_labels(host)
        if re.search(r"pron.*\.podomatic\.com$", host):  # one spam network under thousands of hosts
            host = "pronkpops.podomatic.com"
        path = re.sub(r"//+", "/", parsed.path)
        query = _clean_query(parsed.query, host)
        port = "" if parsed.port in ("80", "443") else parsed.port
        # Credentials are not part of a story's identity (and must not end up in a key).
        key = _Url("http", "", host, port, path or "/", query, None).unsplit()
        return key.lower()
    except Exception:  # noqa: BLE001 - total function by contract
        return None


# ------------------------------------------------------------------------------------------------
# domains, shorteners, homepages

# Platforms whose sub-domains are separate sites (Media Cloud's get_url_distinctive_domain).
_WHOLE_HOST_PLATFORMS_RE = re.compile(
    r"\.go\.com$|\.wordpress\.com$|\.blogspot\.|\.livejournal\.com$|\.privet\.ru$|\.wikia\.com$|"
    r"\.feedburner\.com$|\.24open\.ru$|\.patch\.com$|\.tumblr\.com$"
)


def _host_of(url: str | None) -> str | None:
    fixed = fix_common_url_mistakes(url)
    if not fixed:
        return None
    parsed = _parse(_with_scheme(fixed))
    return parsed.host if parsed else None


@_cached_for_strings
def distinctive_domain(url: str | None) -> str | None:
    """The site a URL belongs to: nytimes.com, dailymail.co.uk, ox.ac.uk, someone.blogspot.com,
    abcnews.go.com. A bare host name is accepted too. None when there is no host."""
    try:
        host = _host_of(url)
        if host is None:
            return None
        if _is_ip(host):
            return host
        if _WHOLE_HOST_PLATFORMS_RE.search("." + host):
            # www.blogspot.com is the platform itself, not a blog called "www".
            return host[4:] if host.startswith("www.") else host
        registrable = _registrable_domain(host)
        if registrable:
            return registrable
        labels = host.split(".")
        return ".".join(labels[-2:])
    except Exception:  # noqa: BLE001 - total function by contract
        return None


_SHORTENER_HOSTS = frozenset(
    URL_SHORTENER_HOSTNAMES | {host for name in URL_SHORTENER_HOSTNAMES if (host := _canonical_host(name))}
)
_SHORT_FORM_RE = re.compile(r"^https?://[a-z]{1,4}\.[a-z]{2}/[a-z0-9]{3,12}/?$", re.I)


@_cached_for_strings
def is_shortened_url(url: str | None) -> bool:
    """True for a link through a URL shortener (bit.ly/abc, wapo.st/4FGH5Re3); never for a bare host."""
    try:
        url = _as_text(url)
        parsed = _parse(url) if url else None
        if parsed is None or parsed.path in ("", "/"):
            return False
        host = parsed.host[4:] if parsed.host.startswith("www.") else parsed.host
        if host in _SHORTENER_HOSTS:
            return True
        return bool(_SHORT_FORM_RE.match(url or ""))
    except Exception:  # noqa: BLE001 - total function by contract
        return False


_HOMEPAGE_PATH_RES = (
    re.compile(r"^$"),
    re.compile(r"^/+$"),
    re.compile(r"^[a-z/\-_]{1,18}/?$"),  # /en/, /global/, /trends/explore
    re.compile(r"^[A-Z/\-_]{1,18}/?$"),  # /US — but not mixed case like /oKyFAMiZ (a short-link id)
)


@_cached_for_strings
def is_homepage_url(url: str | None) -> bool:
    """True for a site's front or section page (http://www.wired.com/, /en/, /global/), judged after
    strict normalization; shortened URLs and URLs with a query never count."""
    try:
        normalized = normalize_url(url)
        if normalized is None or is_shortened_url(normalized):
            return False
        parsed = _parse(normalized)
        if parsed is None or parsed.query:
            return False
        return any(regex.search(parsed.path) for regex in _HOMEPAGE_PATH_RES)
    except Exception:  # noqa: BLE001 - total function by contract
        return False


# ------------------------------------------------------------------------------------------------
# variants

_INVALID_VARIANT_RE = re.compile(r"^https?://(?:www\.)?twitter\.com/account/suspended", re.I)


def url_variants(
    url: str | None, redirect_url: str | None = None, canonical_url: str | None = None
) -> list[str]:
    """Every distinct form a story URL is known by, for matching and Bit.ly look-ups (Media Cloud's
    all_url_variants): the raw URL, the URL after redirects, the <link rel=canonical>, and the strict and
    lossy normalizations of each. Variants that are homepages are dropped unless the URL itself is one
    (a story redirected to the front page is not that front page). Order: as listed, first seen first."""
    try:
        raw = fix_common_url_mistakes(url)
        if not raw:
            return []
        sources = [raw]
        for other in (redirect_url, canonical_url):
            fixed = fix_common_url_mistakes(other)
            if fixed:
                sources.append(fixed)
        variants: list[str] = []
        for source in sources:
            variants.extend(v for v in (source, normalize_url(source), normalize_url_lossy(source)) if v)
        if not is_homepage_url(raw):
            variants = [v for v in variants if not is_homepage_url(v)]
        variants = [v for v in variants if not _INVALID_VARIANT_RE.match(v)]
        return list(dict.fromkeys(variants))
    except Exception:  # noqa: BLE001 - total function by contract
        return []


__all__ = [
    "MAX_URL_LENGTH",
    "distinctive_domain",
    "fix_common_url_mistakes",
    "is_homepage_url",
    "is_http_url",
    "is_shortened_url",
    "normalize_url",
    "normalize_url_lossy",
    "url_variants",
]
