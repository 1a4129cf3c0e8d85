import type { IncomingMessage } from 'node:http'

/**
 * RFC 9110 §7.2's Host: uri-host [ ":" port ], where uri-host is an IP literal in brackets or a
 * reg-name (unreserved, percent-encoded and sub-delims characters; an IPv4 address is one too),
 * possibly empty. An IPv6 literal may carry a zone (RFC 6874: `[fe80::1%25eth0]`).
 */
const HOST_VALUE =
  /^(?:\[[0-9A-Za-z:._~!$&'()*+,;=%-]+\]|[0-9A-Za-z._~!$&'()*+,;=%-]*)(?::[0-9]*)?$/

/**
 * What is wrong with the request's Host header, or undefined when nothing is. RFC 9112 §3.2: a
 * server must answer 400 to an HTTP/1.1 request without one, and to any request with more than
 * one or with a value that is not a host: the two could name different hosts to a proxy in front
 * and to this service. Node keeps only the first in `headers`; `rawHeaders` holds every line.
 */
export function hostHeaderProblem(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders
  let count = 0
  for (let at = 0; at < raw.length; at += 2) {
    const name = raw[at]
    if (name !== undefined && name.length === 4 && name.toLowerCase() === 'host') count += 1
  }
  if (count === 0)
    return req.httpVersion === '1.1' ? 'An HTTP/1.1 request needs a Host header.' : undefined
  if (count > 1) return 'A request may carry one Host header only.'
  const value = req.headers.host ?? ''
  return HOST_VALUE.test(value) ? undefined : 'The Host header is not a host name and port.'
}
