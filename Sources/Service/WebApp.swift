/// The web app served at `/`: plain HTML, CSS and JavaScript embedded in batond (the files are in
/// `web/`, copied into `WebApp+Assets.swift` by `scripts/embed-webapp.py`), so it needs no files,
/// no CDN and no build step at run time. It talks only to this API, same origin.
enum WebApp {
    /// No external anything: scripts, styles, images and connections from this origin only, never
    /// in a frame.
    static let contentSecurityPolicy =
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; "
        + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

    /// The asset served at `path`: its content type and text.
    static func asset(_ path: String) -> (type: String, text: String)? {
        switch path {
        case "/", "/index.html": ("text/html; charset=utf-8", html)
        case "/app.css": ("text/css; charset=utf-8", css)
        case "/app.js": ("text/javascript; charset=utf-8", script)
        default: nil
        }
    }
}
