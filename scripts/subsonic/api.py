"""A Subsonic API call for the scripts (127.0.0.1 only): `call(url, user, password_file, endpoint, **params)`
returns the decoded `subsonic-response` object. Password sent as `p=enc:HEX` (Supysonic refuses tokens)."""
import binascii
import json
import urllib.parse
import urllib.request


def call(url, user, password_file, endpoint, timeout=5, **params):
    with open(password_file, encoding="utf-8") as f:
        password = f.read().strip()
    query = urllib.parse.urlencode({
        "u": user,
        "p": "enc:" + binascii.hexlify(password.encode("utf-8")).decode("ascii"),
        "v": "1.12.0",
        "c": "baton-script",
        "f": "json",
        **params,
    })
    with urllib.request.urlopen(f"{url}/rest/{endpoint}.view?{query}", timeout=timeout) as r:
        return json.load(r).get("subsonic-response", {})
