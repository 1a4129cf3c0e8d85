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
  /**
   * The variable's text for a value given in the setting's own type (an embedding option that is
   * neither a number nor a text), so that the option is checked by `parse` as the variable is.
   * Absent where every value of the type is valid.
   */
  readonly toText?: (value: T) => string
  /** What it means, in one line. */
  readonly doc: string
}

export function setting<T, O extends SettingOwner>(spec: Setting<T, O>): Setting<T, O> {
  return spec
}
