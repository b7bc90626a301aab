public import Hummingbird

/// Answers a `HEAD` request (routed to the same handler as `GET`) without the body, its length in
/// `Content-Length`.
public struct HeadMiddleware<Context: RequestContext>: RouterMiddleware {
    public init() {}

    public func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard request.method == .head else { return try await next(request, context) }
        var response = try await next(request, context)
        let length = response.body.contentLength
        response.body = ResponseBody()
        if let length { response.headers[.contentLength] = String(length) }
        return response
    }
}
