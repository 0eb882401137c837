import ControlParts

/// The web app served at `/`: plain HTML, CSS and JavaScript embedded in batond by SwiftPM
/// (`Sources/Service/WebApp/`, `.embedInCode` resources), so it needs no files, no CDN and no build
/// step at run time. It talks only to this API, same origin.
enum WebApp {
    static let html = String(decoding: PackageResources.index_html, as: UTF8.self)
    static let css = String(decoding: PackageResources.app_css, as: UTF8.self)
    /// `app.js` with every ``EventType`` written into its list of the event stream's listeners.
    static let script = String(decoding: PackageResources.app_js, as: UTF8.self).replacing(
        "[/* event types */]", with: "[" + EventType.allCases.map { "'\($0.rawValue)'" }.joined(separator: ", ") + "]")

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
