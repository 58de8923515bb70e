import { expect, Page } from '@playwright/test';

export const PASSWORD = 'clutchcall-demo';
export const ADMIN = 'dana.okafor@northstar.example';
export const OPERATOR = 'asha.rao@northstar.example';

/** Waits until the wasm has hydrated the server-rendered page. */
export async function hydrated(page: Page) {
  await expect(page.locator('body[data-hydrated="true"]')).toHaveCount(1);
}

export async function signIn(page: Page, email: string, password = PASSWORD) {
  await page.goto('/signin');
  await hydrated(page);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}
