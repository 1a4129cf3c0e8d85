import type { ChangeContext } from '../../src/domain/change-context.js'
import type { User, UserRecord } from '../../src/domain/user.js'
import { MemoryStore } from '../../src/store/memory-store.js'
import type {
  ChangeUser,
  ListPage,
  ListQuery,
  SubjectRead,
  SubjectState,
} from '../../src/store/store.js'

export type StoreMethod =
  | 'get'
  | 'getMany'
  | 'isDeleted'
  | 'subjectOf'
  | 'getAs'
  | 'list'
  | 'create'
  | 'update'
  | 'delete'

export interface StoreCall {
  readonly method: StoreMethod
  /** The id the call named (the new user's id for create; undefined for list and getMany). */
  readonly id: string | undefined
}

export interface StoreFault {
  readonly error: Error
  /** Throw synchronously from the method instead of returning a rejected promise. */
  readonly sync?: boolean
}

/**
 * A MemoryStore that records every call through the Store interface and fails the methods it is
 * told to fail: for tests that prove a request never reached storage, or provoke a 500.
 */
export class FaultyStore extends MemoryStore {
  readonly calls: StoreCall[] = []
  readonly #faults = new Map<StoreMethod, StoreFault>()

  /** From now on, `method` fails with `fault.error`. */
  fail(method: StoreMethod, fault: StoreFault): void {
    this.#faults.set(method, fault)
  }

  /** `method` works again. */
  heal(method: StoreMethod): void {
    this.#faults.delete(method)
  }

  /** The recorded calls of some methods (all when none are named). */
  callsOf(...methods: StoreMethod[]): StoreCall[] {
    return this.calls.filter((call) => methods.length === 0 || methods.includes(call.method))
  }

  override get(id: string): Promise<UserRecord | undefined> {
    return this.#run('get', id, () => super.get(id))
  }

  override getMany(ids: readonly string[]): Promise<UserRecord[]> {
    return this.#run('getMany', undefined, () => super.getMany(ids))
  }

  override isDeleted(id: string): Promise<boolean> {
    return this.#run('isDeleted', id, () => super.isDeleted(id))
  }

  override subjectOf(id: string): Promise<SubjectState> {
    return this.#run('subjectOf', id, () => super.subjectOf(id))
  }

  override getAs(id: string, subject: string): Promise<SubjectRead> {
    return this.#run('getAs', id, () => super.getAs(id, subject))
  }

  override list(query: ListQuery): Promise<ListPage> {
    return this.#run('list', undefined, () => super.list(query))
  }

  override create(user: User, check?: () => void, context?: ChangeContext): Promise<UserRecord> {
    return this.#run('create', user.id, () => super.create(user, check, context))
  }

  override update(id: string, change: ChangeUser, context?: ChangeContext): Promise<UserRecord> {
    return this.#run('update', id, () => super.update(id, change, context))
  }

  override delete(
    id: string,
    check?: (current: UserRecord) => void,
    context?: ChangeContext,
  ): Promise<void> {
    return this.#run('delete', id, () => super.delete(id, check, context))
  }

  #run<T>(method: StoreMethod, id: string | undefined, next: () => Promise<T>): Promise<T> {
    this.calls.push({ method, id })
    const fault = this.#faults.get(method)
    if (fault === undefined) return next()
    if (fault.sync === true) throw fault.error
    return Promise.reject(fault.error)
  }
}
