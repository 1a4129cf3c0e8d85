/**
 * What each owner of the settings (src/settings.ts) reads: the types derived from the table, its
 * defaults, and the picks that hand each part of the service only its own settings.
 */
import { SETTINGS, type Setting, type SettingOwner } from './settings.js'

type Table = typeof SETTINGS
type ValueOf<S> = S extends Setting<infer T> ? T : never

/** Every setting's value, by name. */
export type Settings = { readonly [K in keyof Table]: ValueOf<Table[K]> }

/** The settings read by these owners. */
export type SettingsOf<O extends SettingOwner> = {
  readonly [K in keyof Table as Table[K]['owner'] extends O ? K : never]: ValueOf<Table[K]>
}

/** The same, each optional (an option left out, or given as undefined, takes its default). */
export type OptionalSettings<T> = { [K in keyof T]?: T[K] | undefined }

/** The settings the service reads from its options (the bulk routes' included). */
export type ServiceSettings = SettingsOf<'service' | 'bulk'>
/** The settings of the store the process builds. */
export type StoreSettings = SettingsOf<'store'>
/** The settings of the export and import routes. */
export type BulkSettings = SettingsOf<'bulk'>

/** The defaults of the settings these owners read. */
export function defaultsOf<O extends SettingOwner>(owners: readonly O[]): SettingsOf<O> {
  const entries = Object.entries(SETTINGS).filter(([, spec]) =>
    owners.some((owner) => owner === spec.owner),
  )
  // The filter above is what SettingsOf's key remapping says; TypeScript cannot follow it.
  return Object.freeze(
    Object.fromEntries(entries.map(([name, spec]) => [name, spec.default])),
  ) as SettingsOf<O>
}

/** The settings of these owners among `values` (the rest left behind), for the code they go to. */
export function pickSettings<V extends OptionalSettings<Settings>, O extends SettingOwner>(
  values: V,
  owners: readonly O[],
): Pick<V, keyof V & keyof SettingsOf<O>> {
  const picked: Record<string, unknown> = {}
  for (const [name, spec] of Object.entries(SETTINGS)) {
    if (owners.some((owner) => owner === spec.owner) && name in values)
      picked[name] = values[name as keyof Settings]
  }
  // As in defaultsOf: the keys kept are those SettingsOf<O> names.
  return picked as Pick<V, keyof V & keyof SettingsOf<O>>
}
