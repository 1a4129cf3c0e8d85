/**
 * What every entry of the settings table (src/settings.ts) is. Who reads a setting: the process entry alone, the store it builds, the service, or the bulk
 * routes (given by the service). The options types (settings-by-owner.ts) are picked by it.
 */
export type SettingOwner = 'process' | 'store' | 'service' | 'bulk'

export interface Setting<T, O extends SettingOwner = SettingOwner> {
  readonly owner: O
  /**
   * The environment variables it is read from, the first one set winning; none for an option of
   * the embedding API only.
   */
  readonly env: readonly string[]
  /** What an unset variable, or an option left out, means. */
  readonly default: T
  /**
   * Turns a variable's trimmed, non-empty text into the value, or throws ConfigError naming the
   * variable.
   */
  readonly parse: (text: string, name: string) => T
  /** What it means, in one line. */
  readonly doc: string
}

export function setting<T, O extends SettingOwner>(spec: Setting<T, O>): Setting<T, O> {
  return spec
}
