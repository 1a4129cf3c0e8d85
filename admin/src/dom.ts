/** The element with this id, of this type: the page's HTML is fixed, so a miss is a bug. */
export function byId<T extends HTMLElement>(id: string, type: new () => T): T {
  const found = document.getElementById(id)
  if (!(found instanceof type)) throw new Error(`admin page: no ${type.name} #${id}`)
  return found
}

/** A new element with text. */
export function make<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  text = '',
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag)
  if (text !== '') element.textContent = text
  return element
}

/** Shows one element of a group, hiding the others. */
export function show(element: HTMLElement, shown: boolean): void {
  element.hidden = !shown
}
