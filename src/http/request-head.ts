import type { IncomingMessage } from 'node:http'

import { HttpError } from './problem.js'

/**
 * RFC 9110 §7.2's Host: uri-host [ ":" port ], where uri-host is an IP literal in brackets or a
 * reg-name (unreserved, percent-encoded and sub-delims characters; an IPv4 address is one too),
 * possibly empty. An IPv6 literal may carry a zone (RFC 6874: `[fe80::1%25eth0]`).
 */
const HOST_VALUE =
  /^(?:\[[0-9A-Za-z:._~!$&'()*+,;=%-]+\]|[0-9A-Za-z._~!$&'()*+,;=%-]*)(?::[0-9]*)?$/

/** Node's own test of an Expect field for 100-continue (the others it would answer 417 itself). */
const CONTINUE = /(?:^|\W)100-continue(?:$|\W)/i

/**
 * The refusal of a request for its head alone, before it is routed: 400 for its version, for a
 * target with a fragment or an asterisk-form target on another method than OPTIONS, for its
 * Host, Authorization or Content-Type lines (singletonHeaderProblem) or for Transfer-Encoding on
 * HTTP/1.0 or a transfer coding other than chunked; 417 for an expectation other than
 * 100-continue on HTTP/1.1 (RFC 9110 §10.1.1), which Node would answer with a bare status line.
 */
export function requestHeadProblem(req: IncomingMessage): HttpError | undefined {
  const problem =
    versionProblem(req) ??
    targetProblem(req.url ?? '/', req.method) ??
    singletonHeaderProblem(req) ??
    transferCodingProblem(req)
  if (problem !== undefined) return new HttpError('bad_request', problem)
  const expect = req.headers.expect
  if (expect === undefined || req.httpVersion !== '1.1' || CONTINUE.test(expect)) return undefined
  return new HttpError(
    'expectation_failed',
    'The only expectation this service meets is 100-continue.',
  )
}

/**
 * Only HTTP/1.0 and 1.1 are spoken here. Node's parser refuses most other versions itself (400),
 * but takes `HTTP/2.0` and the version-less request line of HTTP/0.9 and would answer them as
 * HTTP/1.1; something in front may read such a request another way, or not at all.
 */
function versionProblem(req: IncomingMessage): string | undefined {
  return req.httpVersionMajor === 1
    ? undefined
    : `This service speaks HTTP/1.1 and HTTP/1.0, not HTTP/${req.httpVersionMajor}.${req.httpVersionMinor}.`
}

/**
 * RFC 9112 §3.2: no form of a request target has a fragment (a client strips it, RFC 9110 §7.1).
 * Node passes one through, where it would be read as part of the last path segment or of the
 * last query value; something in front may have cut it off and routed the rest.
 * RFC 9112 §3.2.4: the asterisk form (`*`) is only for an OPTIONS about the server as a whole.
 */
function targetProblem(target: string, method: string | undefined): string | undefined {
  if (target.includes('#')) return 'A request target may not carry a fragment (#).'
  if (target === '*' && method !== 'OPTIONS')
    return 'The request target * is for OPTIONS only; other methods name a path.'
  return target.startsWith('/') ? undefined : absoluteTargetProblem(target)
}

const ABSOLUTE_TARGET = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)/

/**
 * RFC 9112 §3.2.2: an absolute-form target's authority stands in for Host, so it is held to what
 * a Host value must be, and more: RFC 9110 §4.2.1 refuses an `http` URI with an empty host, and
 * RFC 9110 §4.2.4 a user name before it. Only http and https name this service's resources.
 */
function absoluteTargetProblem(target: string): string | undefined {
  const absolute = ABSOLUTE_TARGET.exec(target)
  if (absolute === null) return undefined
  const [, scheme = '', authority = ''] = absolute
  if (!/^https?$/i.test(scheme)) return 'An absolute request target names an http or https URI.'
  return authority === '' || authority.startsWith(':') || !HOST_VALUE.test(authority)
    ? 'The host of the request target is not a host name and port (nor a user name before it).'
    : undefined
}

/**
 * RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing, and a transfer
 * coding the server does not understand cannot be read. Node's parser requires chunked last and
 * then reads the body as chunked alone, so `gzip, chunked` would be read as plain JSON where
 * something in front applied, or expects, the gzip coding. The RFC suggests 501 for the second;
 * it is a 400 here, as is every request whose body cannot be framed (Node refuses `gzip` alone
 * so), so that a 5xx always means the service failed, never what a client sent.
 */
function transferCodingProblem(req: IncomingMessage): string | undefined {
  const field = req.headers['transfer-encoding']
  if (field === undefined) return undefined
  if (req.httpVersionMinor === 0) return 'An HTTP/1.0 request may not carry Transfer-Encoding.'
  const codings = field.split(',').map((coding) => coding.trim().toLowerCase())
  return codings.every((coding) => coding === 'chunked' || coding === '')
    ? undefined
    : 'The only transfer coding this service reads is chunked; send the body without another one.'
}

/**
 * What is wrong with the request's Host, Authorization or Content-Type lines, or undefined when
 * nothing is. Node keeps only the first of each in `headers`; a proxy or firewall in front may
 * keep the last, so two of one could name one host, caller or body type to it and another to
 * this service (a body inspected as text there and read as JSON here).
 * RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request without Host, and to any request
 * with more than one or with a value that is not a host. RFC 6750 §3.1: a request that carries
 * more than one credential is `invalid_request`, a 400.
 */
function singletonHeaderProblem(req: IncomingMessage): string | undefined {
  const raw = req.rawHeaders
  let hosts = 0
  let authorizations = 0
  let contentTypes = 0
  for (let at = 0; at < raw.length; at += 2) {
    const name = raw[at]
    if (name === undefined) continue
    if (name.length === 4 && name.toLowerCase() === 'host') hosts += 1
    else if (name.length === 13 && name.toLowerCase() === 'authorization') authorizations += 1
    else if (name.length === 12 && name.toLowerCase() === 'content-type') contentTypes += 1
  }
  if (authorizations > 1) return 'A request may carry one Authorization header only.'
  if (contentTypes > 1) return 'A request may carry one Content-Type header only.'
  if (hosts === 0)
    return req.httpVersion === '1.1' ? 'An HTTP/1.1 request needs a Host header.' : undefined
  if (hosts > 1) return 'A request may carry one Host header only.'
  const value = req.headers.host ?? ''
  return HOST_VALUE.test(value) ? undefined : 'The Host header is not a host name and port.'
}
