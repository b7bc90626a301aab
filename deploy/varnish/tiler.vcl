# Varnish (Debian's `varnish`, 7.x) in front of several `tiler serve` instances that share one source
# folder and one cache folder. Each image identifier goes to one instance (consistent hashing: the
# shard director), so each image is built once and its tiles are cached there; an instance that fails
# its health probe (/health) hands its identifiers to the next in the ring, which reuses the store in
# the shared cache folder (an instance that finds another building an image waits for its lock).
#
# Tiles and documents are cached for the lifetimes the instances send (tiler serve --image-max-age,
# --document-max-age) and kept a day longer, so that an expired object is revalidated (a 304 when the
# source is unchanged: no encode). `BAN /` with `X-Image-Id: ID` from an admin purge
# (tiler serve --admin-token ... --purge-url http://VARNISH) removes every cached answer of the image.
#
# The backends below are on 127.0.0.1:8081-8083; tests/deploy rewrite the ports. Start the instances
# with --trusted-proxy set to this Varnish's address: they then believe the forwarded headers it sends,
# which name the public URL in info.json. Those headers are this Varnish's own, never a client's (a
# client's X-Forwarded-Host would otherwise name the URL in an info.json cached for everyone): it
# removes what clients send and sets X-Forwarded-Proto to https for connections a TLS terminator hands
# it with the PROXY protocol (hitch, haproxy's send-proxy-v2: add `-a :6086,PROXY`). For a path prefix,
# set X-Forwarded-Prefix below; or give the instances --public-url and no forwarded header counts.
vcl 4.1;

import directors;
import proxy;

probe health {
    .url = "/health";
    .interval = 1s;
    .timeout = 1s;
    .window = 3;
    .threshold = 2;
}

backend tiler1 { .host = "127.0.0.1"; .port = "8081"; .probe = health; }
backend tiler2 { .host = "127.0.0.1"; .port = "8082"; .probe = health; }
backend tiler3 { .host = "127.0.0.1"; .port = "8083"; .probe = health; }

sub vcl_init {
    new tilers = directors.shard();
    tilers.add_backend(tiler1);
    tilers.add_backend(tiler2);
    tilers.add_backend(tiler3);
    tilers.reconfigure();
}

# Who may send BAN: the instances themselves (their admin purge).
acl purgers {
    "127.0.0.1";
    "::1";
}

# Front proxies that log users in (oauth2-proxy, mod_auth_openidc) and name them in X-Remote-User; none
# by default (192.0.2.1 is a documentation address, TEST-NET-1).
acl authenticators {
    "192.0.2.1";
}

sub vcl_recv {
    if (req.method == "BAN") {
        if (client.ip !~ purgers || !req.http.X-Image-Id) {
            return (synth(403, "Forbidden"));
        }
        ban("obj.http.X-Image-Id == " + req.http.X-Image-Id);
        return (synth(200, "Banned"));
    }
    # The forwarded headers: this Varnish's own (see the top). X-Forwarded-For is Varnish's (the client's
    # address appended).
    unset req.http.Forwarded;
    unset req.http.X-Forwarded-Host;
    unset req.http.X-Forwarded-Port;
    unset req.http.X-Forwarded-Prefix;
    unset req.http.X-Forwarded-Proto;
    if (proxy.is_ssl()) {
        set req.http.X-Forwarded-Proto = "https";
    }
    # set req.http.X-Forwarded-Prefix = "/tiles";
    # The identifier of /iiif/3/ID/..., /iiif/2/ID/..., /dzi/ID.dzi and /dzi/ID_files/...: the shard key.
    unset req.http.X-Image-Id;
    if (req.url ~ "^/(iiif/[23]/[^/?]+|dzi/[^/?]+(\.dzi|_files/))") {
        set req.http.X-Image-Id = regsub(req.url, "^/(iiif/[23]/([^/?]+)|dzi/([^/?]+?)(\.dzi|_files/)).*$", "\2\3");
        set req.backend_hint = tilers.backend(by=KEY, key=tilers.key(req.http.X-Image-Id));
    } else {
        set req.backend_hint = tilers.backend(by=URL);
    }
    if (req.method != "GET" && req.method != "HEAD") {
        return (pass);
    }
    # Health, readiness, metrics, build states, uploads and the admin API: always the instance's own answer.
    if (req.url ~ "^/(health|ready|metrics|images/|admin/)") {
        return (pass);
    }
    # Restricted images (the instances' "access" rules, IIIF Auth 2.0): the login, token, probe and
    # logout services, and every request that carries a session or a front proxy's user, go to an
    # instance each time; such answers are never stored. Without one, a restricted image's answer is
    # the anonymous one, which the instance marks private: not stored either (the built-in VCL).
    # The instances take "userHeader" from Varnish (a trusted proxy): only a front proxy that logs users
    # in (in the acl authenticators) may set it; from anyone else it is removed.
    if (client.ip !~ authenticators) {
        unset req.http.X-Remote-User;
        unset req.http.X-Remote-Groups;
    }
    if (req.url ~ "^/auth/" || req.http.Cookie ~ "(^|;\s*)tiler_session=" || req.http.X-Remote-User) {
        return (pass);
    }
    unset req.http.Cookie;
    unset req.http.Authorization;
    return (hash);
}

sub vcl_backend_response {
    # What the instance says not to store (a tile of an image still being built): passed on, and no
    # hit-for-miss marker kept (Varnish's default, two minutes of misses, would outlive the build).
    if (beresp.http.Cache-Control ~ "no-store") {
        set beresp.uncacheable = true;
        set beresp.ttl = 0s;
        return (deliver);
    }
    # Kept past its lifetime so that it is revalidated (If-None-Match, If-Modified-Since) rather than
    # fetched again.
    set beresp.keep = 1d;
    if (bereq.http.X-Image-Id) {
        set beresp.http.X-Image-Id = bereq.http.X-Image-Id;
    }
}

sub vcl_deliver {
    unset resp.http.X-Image-Id;
}
