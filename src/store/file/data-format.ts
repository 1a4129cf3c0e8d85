import { readdirSync, readFileSync } from 'node:fs'
import path from 'node:path'

import { StartError } from '../../domain/errors.js'
import type { DurableDirectory } from './atomic-write.js'
import { hasCode, namingFile } from './errno.js'
import { checkNotSpecial } from './own-files.js'

/** In DATA_DIR: the number of the layout its files are written in. */
const FORMAT_FILE = 'format'

/**
 * The layout this release reads and writes. A release whose files an earlier one would misread
 * (a file it ignores, a line it takes for damage) raises it, so that the earlier one refuses the
 * directory instead of serving it without what it does not know (docs/operations.md, upgrades).
 * Releases from before this file ignore it.
 */
const DATA_FORMAT = 1

/** The temp file of a cut write of FORMAT_FILE (DurableDirectory.writeFile's naming). */
const FORMAT_TEMP = /^\.format\.[0-9a-z]+\.tmp$/

/** The data directory is in a layout this release cannot read. */
export class DataFormatError extends StartError {
  override name = 'DataFormatError'
}

/**
 * Refuses a data directory written in a later release's layout, before anything in it is read or
 * written; marks a new one, or one of a release from before the file, with this release's layout.
 */
export async function checkDataFormat(root: DurableDirectory): Promise<void> {
  const file = path.join(root.path, FORMAT_FILE)
  checkNotSpecial(file)
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (error) {
    if (!hasCode(error, 'ENOENT')) throw namingFile(error, file)
    // Only a write cut before its rename leaves a temp file, and then the file is not there.
    for (const name of readdirSync(root.path).filter((entry) => FORMAT_TEMP.test(entry)))
      await root.removeFile(name, false)
    await root.writeFile(FORMAT_FILE, `${DATA_FORMAT}\n`)
    return
  }
  const format = /^([1-9][0-9]{0,8})\n?$/.exec(text)?.[1]
  if (format === undefined)
    throw new DataFormatError(
      `${file} is damaged: it holds the number of the data directory's layout (${DATA_FORMAT} for this release) and nothing else`,
    )
  if (Number(format) > DATA_FORMAT)
    throw new DataFormatError(
      `${file}: the data directory was written by a later release (layout ${format}; this release reads up to ${DATA_FORMAT}): run that release or a later one, or restore the backup taken before the upgrade`,
    )
}
