import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync, unlinkSync } from 'node:fs'
import path from 'node:path'

import { createSingleKeySet, KeyError, type KeySet } from '../auth/keys.js'
import { makeDurableDirectory, writeFileAtomicSync } from '../store/file/atomic-write.js'
import { hasCode } from '../store/file/errno.js'
import { checkNotSpecial, NotOwnFileError } from '../store/file/own-files.js'
import { type Config, ConfigError } from './config.js'

export const SECRET_FILE = '.jwt-secret'

export interface ResolvedKeys {
  keys: KeySet
  /** The file a new secret was written to on this start, if one was. */
  generatedFile: string | undefined
}

/**
 * The keys to use: the configured ones; in production, nothing else (a refusal to start); else the
 * secret kept in DATA_DIR/.jwt-secret; else a new random secret written there (0600). `writing` is
 * told the file before it is written: a stop signal may come from then on, and the start must
 * then remove what it wrote. The write blocks, so that the signal's handler runs before it or
 * after the file is in place, never while a temp file holds the secret.
 */
export function resolveKeys(
  config: Config,
  writing: (file: string) => void = () => undefined,
): ResolvedKeys {
  if (config.keys !== undefined) return { keys: config.keys, generatedFile: undefined }
  const file = path.join(config.dataDir, SECRET_FILE)
  // A kept secret was made by a development start, which printed a day-long admin token signed
  // with it (into logs that outlive the start): production never trusts it.
  if (config.production) throw noProductionSecret(file)
  const kept = readSecretFile(file)
  if (kept !== undefined) return { keys: kept, generatedFile: undefined }
  makeDurableDirectory(config.dataDir)
  const text = `base64url:${randomBytes(32).toString('base64url')}`
  writing(file)
  writeFileAtomicSync(file, `${text}\n`)
  return { keys: createSingleKeySet(text, file), generatedFile: file }
}

/**
 * Why production refuses to run without a configured secret: the service's start, and the token
 * command, which must not sign with a file the service never reads there.
 */
export function noProductionSecret(file: string): ConfigError {
  const kept = existsSync(file)
    ? ` (${file}, made by a development start, is never used in production)`
    : ''
  return new ConfigError(
    `JWT_SECRET (or JWT_SECRETS) must be set when NODE_ENV=production: set one of them${kept}`,
  )
}

/**
 * Removes the secret this start wrote when the start fails before it listens: the next start then
 * writes its own and prints its token, instead of keeping a secret whose token nobody saw. Called
 * while this process still holds DATA_DIR's lock, so no other start can have read the file.
 */
export function removeGeneratedSecret(file: string | undefined): void {
  if (file === undefined) return
  try {
    unlinkSync(file)
  } catch {
    // A secret left behind only costs the next start its message.
  }
}

/** The secret kept by an earlier first start, or undefined when there is none. */
export function readSecretFile(file: string): KeySet | undefined {
  let text: string
  try {
    checkNotSpecial(file)
  } catch (error) {
    if (error instanceof NotOwnFileError) throw new ConfigError(error.message)
    throw error
  }
  try {
    text = readFileSync(file, 'utf8').trim()
  } catch (error) {
    if (hasCode(error, 'ENOENT')) return undefined
    throw new ConfigError(
      `${file} cannot be read (${String((error as { code?: unknown }).code ?? error)}): it holds the secret a start without JWT_SECRET uses; make it a file this user may read, or set JWT_SECRET`,
    )
  }
  try {
    return createSingleKeySet(text, `JWT_SECRET from ${file}`)
  } catch (error) {
    if (error instanceof KeyError) throw new ConfigError(error.message)
    throw error
  }
}
