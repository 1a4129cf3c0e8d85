import { ERROR_CODES } from '../http/problem.js'
import { type Json, ref } from '../routes/route.js'
import { INVISIBLE_BMP_CLASS, TRIMMED_CLASS } from '../users/text-rules.js'
import { FIELD_NAMES, type FieldSpec, USER_FIELDS, WRITABLE_FIELDS } from '../users/user-fields.js'

/*
 * Patterns are regular expressions over the value as sent, in the subset that ECMAScript (with the
 * `u` flag, as Ajv runs them) and code-point engines without Unicode property classes (Python's
 * `re`) read alike: \u escapes, literal characters, classes, groups, lookaheads; no `\p{…}`, and
 * `\s` only in `[\s\S]` (any character in every engine), since engines disagree on what it holds.
 * The service trims surrounding white space first, so each pattern allows it around the value and
 * counts lengths on what is inside.
 */
const TRIMMED = `[${TRIMMED_CLASS}]`
// Control characters (C0, DEL, C1) and, in `u` mode, lone surrogates only (a pair is one code point).
const CONTROLS = '\\u0000-\\u001F\\u007F-\\u009F\\uD800-\\uDFFF'

/**
 * The email rule of validate-user.ts as one pattern: after trimming, one `@`, a local part of 1 to
 * `maxLocalLength` code points and a domain of at least two labels, no white space or control
 * characters, a visible character in the local part and in each label, and `minLength` to
 * `maxLength` code points in all.
 */
export function emailPattern(spec: FieldSpec): string {
  const forbidden = `${TRIMMED_CLASS}${CONTROLS}`
  const local = `[^@${forbidden}]*[^@${forbidden}${INVISIBLE_BMP_CLASS}][^@${forbidden}]*`
  const label = `[^@.${forbidden}]*[^@.${forbidden}${INVISIBLE_BMP_CLASS}][^@.${forbidden}]*`
  const localLength = `(?=[^${TRIMMED_CLASS}@]{1,${spec.maxLocalLength ?? ''}}@)`
  const length = `(?=[^${TRIMMED_CLASS}]{${spec.minLength ?? 0},${spec.maxLength ?? ''}}${TRIMMED}*$)`
  return `^${TRIMMED}*${localLength}${length}${local}@${label}(?:\\.${label})+${TRIMMED}*$`
}

/**
 * A trimmed text field without control characters: `minLength` to `maxLength` code points after
 * trimming and, with requireVisible, at least one character that is neither white space nor
 * default-ignorable (zero-width).
 */
export function trimmedTextPattern(spec: FieldSpec): string {
  const allowed = `[^${CONTROLS}]`
  const visible =
    spec.requireVisible === true ? `(?=[\\s\\S]*?[^${INVISIBLE_BMP_CLASS}${CONTROLS}])` : ''
  const length = `(?=${allowed}{${spec.minLength ?? 0},${spec.maxLength ?? ''}}${TRIMMED}*$)`
  return `^${visible}${TRIMMED}*${length}${allowed}*${TRIMMED}*$`
}

/** The component schemas: the user and its request bodies from the field rules, pages, problems. */
export function createSchemas(): Record<string, Json> {
  const properties = Object.fromEntries(
    FIELD_NAMES.map((name) => [name, toSchema(USER_FIELDS[name])]),
  )
  const writable = Object.fromEntries(
    WRITABLE_FIELDS.map((name) => [name, toSchema(USER_FIELDS[name])]),
  )
  const required = WRITABLE_FIELDS.filter((name) => USER_FIELDS[name].required)
  const shownAlways = FIELD_NAMES.filter((name) => {
    const spec: FieldSpec = USER_FIELDS[name]
    return spec.optional !== true
  })
  const echo = 'Output-only fields may be sent only with their stored values.'
  const metadata = USER_FIELDS.metadata
  return {
    User: {
      type: 'object',
      required: shownAlways,
      additionalProperties: false,
      properties,
      description: 'A user.',
    },
    UserCreate: {
      type: 'object',
      required,
      additionalProperties: false,
      properties: writable,
      description: 'Output-only fields are refused (read_only).',
    },
    UserReplace: {
      type: 'object',
      required,
      additionalProperties: false,
      properties,
      description: `Replaces every writable field; a missing metadata becomes {}. ${echo}`,
    },
    UserPatch: {
      type: 'object',
      additionalProperties: false,
      properties: {
        ...properties,
        metadata: {
          ...withoutKeyBound(toSchema(metadata)),
          type: ['object', 'null'],
          additionalProperties: { ...metadataValue(), type: ['string', 'null'] },
          description: `${metadata.description} null removes all metadata; a key set to null is removed. The patch itself may name more than ${metadata.maxKeys} keys (its removals free room for its additions): the limit is on the merged result, else 422 too_many_keys.`,
        },
      },
      description: `JSON Merge Patch (RFC 7396): null removes a metadata key, or all of metadata; {} changes nothing. ${echo}`,
    },
    EmptyBody: { type: 'object', maxProperties: 0, description: 'Send no body or {}.' },
    UserPage: {
      type: 'object',
      required: ['items', 'nextCursor'],
      additionalProperties: false,
      description: 'One page of users; follow nextCursor until it is null.',
      properties: {
        items: { type: 'array', items: ref('User') },
        nextCursor: {
          type: ['string', 'null'],
          description: 'Pass it as cursor for the next page; null on the last page.',
        },
      },
    },
    Status: {
      type: 'object',
      required: ['status'],
      properties: { status: { type: 'string' } },
      description: 'A probe answer.',
    },
    FieldError: {
      type: 'object',
      required: ['pointer', 'code', 'message'],
      description: 'One offending field of a 422.',
      properties: {
        pointer: {
          type: 'string',
          description: 'JSON Pointer (RFC 6901) to the field; empty for the whole body.',
        },
        code: {
          type: 'string',
          description: 'A stable word: required, invalid_type, invalid_format, too_long, ...',
        },
        message: { type: 'string' },
      },
    },
    Problem: {
      type: 'object',
      required: ['type', 'title', 'status', 'detail', 'code', 'requestId'],
      description: 'An error (RFC 9457). Branch on code, never on detail.',
      properties: {
        type: { type: 'string' },
        title: { type: 'string' },
        status: { type: 'integer' },
        detail: { type: 'string' },
        code: { type: 'string', enum: Object.keys(ERROR_CODES) },
        requestId: { type: 'string' },
        errors: { type: 'array', maxItems: 20, items: ref('FieldError') },
        outcome: {
          type: 'string',
          enum: ['unknown'],
          description:
            'Only on a 503 storage_unavailable whose write may still have been made (its log sync failed): read the resource back before retrying. Without it, an error means nothing changed.',
        },
        'violated-policies': {
          type: 'array',
          items: { type: 'string', enum: ['subject', 'address'] },
          description: 'Only on a 429 rate_limited: the rate-limit policy whose quota is spent.',
        },
      },
    },
  }
}

// A merge patch's removals (null) make room for its additions, so the bound holds only on the
// result, which no schema of the patch can state.
function withoutKeyBound(schema: Json): Json {
  const { maxProperties: _, ...rest } = schema
  return rest
}

function metadataValue(): Json {
  // A lone surrogate is refused; maxLength counts code points, as the service does.
  return {
    type: 'string',
    maxLength: USER_FIELDS.metadata.maxValueLength,
    pattern: `^[^\\uD800-\\uDFFF]*$`,
  }
}

function toSchema(spec: FieldSpec): Json {
  const common = {
    description: spec.description,
    examples: [spec.example],
    ...(spec.access === 'output' ? { readOnly: true } : {}),
  }
  if (spec.type === 'integer')
    return {
      type: 'integer',
      minimum: spec.minimum ?? 1,
      ...(spec.maximum === undefined ? {} : { maximum: spec.maximum }),
      ...common,
    }
  if (spec.type === 'metadata') {
    return {
      type: 'object',
      maxProperties: spec.maxKeys,
      propertyNames: { pattern: spec.keyPattern },
      additionalProperties: metadataValue(),
      ...common,
    }
  }
  if (spec.trim === true) {
    // Lengths count after trimming, so the pattern holds them exactly. minLength and maxLength
    // state them for tools that cannot run the pattern: a value sent trimmed meets both exactly.
    const pattern = spec.format === 'email' ? emailPattern(spec) : trimmedTextPattern(spec)
    return {
      type: 'string',
      ...(spec.minLength === undefined ? {} : { minLength: spec.minLength }),
      ...(spec.maxLength === undefined ? {} : { maxLength: spec.maxLength }),
      pattern,
      ...common,
    }
  }
  return {
    type: 'string',
    ...(spec.format === undefined ? {} : { format: spec.format }),
    ...(spec.minLength === undefined ? {} : { minLength: spec.minLength }),
    ...(spec.maxLength === undefined ? {} : { maxLength: spec.maxLength }),
    ...(spec.pattern === undefined ? {} : { pattern: spec.pattern }),
    ...(spec.enum === undefined ? {} : { enum: spec.enum }),
    ...common,
  }
}
