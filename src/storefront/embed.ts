/**
 * The tag a merchant pastes into a product page: the one place its shape is written, for the
 * dashboard (filled in with the store) and the front page (with an example store).
 */
export function embedSnippet(baseUrl: string, shop: string, product = '{{ product.id }}'): string {
  return `<script src="${baseUrl}/widget.js" defer data-shop="${shop}" data-product="${product}"></script>`;
}
