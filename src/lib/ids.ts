import { v7, validate, version } from 'uuid';

/** Time-ordered UUIDs keep new rows at the right edge of their btree indexes. */
export const newId = (): string => v7();

export const isUuid = (value: string): boolean => validate(value) && version(value) >= 1;
