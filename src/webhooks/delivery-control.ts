/**
 * What the endpoint operations tell delivery: an endpoint was created or changed (enabled,
 * disabled, its URL, types or secrets, its cursor moved), or deleted (no attempt starts after).
 */
export interface DeliveryControl {
  /** `cursorMoved`: a client moved its cursor, which starts a fresh retry schedule. */
  changed(id: string, cursorMoved?: boolean): void
  removed(id: string): void
}

/** For a service that delivers nothing (tests of the resource alone). */
export const NO_DELIVERY: DeliveryControl = {
  changed() {
    // Nothing delivers.
  },
  removed() {
    // Nothing delivers.
  },
}
